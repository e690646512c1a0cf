package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
)

// RowBytes is a measuring aid, not part of the store: the bytes held by the rows of the store at
// path that a conversation's turns add to, counted column by column (the text and blob columns
// at their length, each integer column as 8 bytes): the events, the metadata and the remembered
// keys. It reads through a connection of its own, so it may run while the store is open; it
// counts what has committed. Page and index overhead is not counted: the bytes written to disk
// are measured apart (reference/perf).
//
// Errors: the database cannot be opened or read.
//
//	before, err := sqlite.RowBytes(ctx, filepath.Join(dir, "loom.db"))
func RowBytes(ctx context.Context, path string) (int64, error) {
	q := url.Values{}
	q.Add("mode", "ro")
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "query_only(1)")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return 0, fmt.Errorf("store: row bytes: %w", err)
	}
	defer db.Close()
	var n int64
	err = db.QueryRowContext(ctx, `SELECT
	(SELECT COALESCE(SUM(length(CAST(stream AS BLOB)) + length(CAST(kind AS BLOB)) + COALESCE(length(data), 0) + 32), 0) FROM events) +
	(SELECT COALESCE(SUM(length(CAST(key AS BLOB)) + length(val) + 8), 0) FROM meta) +
	(SELECT COALESCE(SUM(length(CAST(scope AS BLOB)) + length(CAST(key AS BLOB)) + 16), 0) FROM remembered)`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("store: row bytes: %w", err)
	}
	return n, nil
}
