package api

// Transfer is the progress of a data transfer.
type Transfer struct {
	What  string `json:"what"`
	Done  int64  `json:"done"`
	Total int64  `json:"total"`
}
