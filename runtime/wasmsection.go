package runtime

// Section ids of the core binary format.
const (
	secCustom   = 0
	secType     = 1
	secImport   = 2
	secFunc     = 3
	secGlobal   = 6
	secExport   = 7
	secStart    = 8
	secElem     = 9
	secCode     = 10
	secTag      = 13
	maxSectorID = 13
)

// sectionRank is the order non-custom sections must appear in.
var sectionRank = [maxSectorID + 1]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 13: 6, 6: 7, 7: 8, 8: 9, 9: 10, 12: 11, 10: 12, 11: 13}

// section is one section of a module as the rewriter reads it: its id and its payload.
type section struct {
	id      byte
	payload []byte
}
