package wasmbin

// Section ids of the core binary format, and the last one known.
const (
	SecCustom    = 0
	SecType      = 1
	SecImport    = 2
	SecFunc      = 3
	SecTable     = 4
	SecMemory    = 5
	SecGlobal    = 6
	SecExport    = 7
	SecStart     = 8
	SecElem      = 9
	SecCode      = 10
	SecData      = 11
	SecDataCount = 12
	SecTag       = 13
	MaxSectionID = 13
)

// SectionRank is the order non-custom sections must appear in.
var SectionRank = [MaxSectionID + 1]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 13: 6, 6: 7, 7: 8, 8: 9, 9: 10, 12: 11, 10: 12, 11: 13}

// Section is one section of a module: its id and its payload.
type Section struct {
	ID      byte
	Payload []byte
}
