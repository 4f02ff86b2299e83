package azure

// MaxMessageBytes returns the largest body Send carries on this queue without attributes
// (handler outputs have none): Azure's 65536-character limit on the message text, after
// this package's encoding. Under EncodingBase64 every 3 bytes become 4 characters, so 49152
// bytes; under EncodingText the body is the text, so 65536. A message with attributes (a
// dead letter's envelope) carries less; see encode.
func (q *Queue) MaxMessageBytes() int { return maxBodyFor(q.b.enc) }

// maxBodyFor is the largest body whose encoding under enc, without attributes, fits
// maxMessageText.
func maxBodyFor(enc Encoding) int {
	if enc == EncodingText {
		return maxMessageText
	}
	return maxMessageText / 4 * 3
}
