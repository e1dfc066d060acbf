// Package cname converts the Go names of package uapi back to the C names
// they mirror: IbUverbsWc -> ib_uverbs_wc, WrId -> wr_id. The uapi naming
// scheme (C name split at '_', each word capitalised, joined) loses where the
// underscores were only before digits (pad_1 -> Pad1), so Candidates lists
// both spellings.
package cname
