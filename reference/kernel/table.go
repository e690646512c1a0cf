package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/loomcheck/loomcheck/reference/loomtype"
	"github.com/loomcheck/loomcheck/reference/store"
)

// Record tables: what a layer above the kernel keeps that is not a log of an execution (an index,
// a record that changes in place) lives in a typed table beside the journals, written in the
// kernel's transactions (Update) through the same store the journals are, so that a fenced kernel
// refuses a table write exactly as it refuses a journal write.
//
// On disk a table is metadata of the store: the record under key k of table n is stored under
// "tbl/" + len(n) + ":" + n + "/" + k, its value the record as JSON, and the table's schema version
// under "tblv/" + n. The length before the name keeps the encoding injective: no (table, key) pair
// shares a stored key with another, whatever bytes either holds. These names are the on-disk shape
// of every table already written: never change them.

const (
	tablePrefix   = "tbl/"
	versionPrefix = "tblv/"
)

// tableSpace begins the stored key of every record of table name.
func tableSpace(name string) string {
	return tablePrefix + strconv.Itoa(len(name)) + ":" + name + "/"
}

func tableKey(name, key string) string { return tableSpace(name) + key }
func versionKey(name string) string    { return versionPrefix + name }

// MaxScan is the most records one Scan returns, whatever limit is asked for.
const MaxScan = store.MaxRead

// Errors of record tables.
var (
	// ErrTableName: a table name that is empty, longer than 256 characters or holds a control
	// character, or a version below 1.
	ErrTableName = errors.New("kernel: invalid record table")
	// ErrRecordKey: an empty record key.
	ErrRecordKey = errors.New("kernel: empty record key")
	// ErrTableNewer: the stored table was written by a newer version of the engine
	// (*TableVersionError).
	ErrTableNewer = errors.New("kernel: record table newer than this engine")
)

// TableVersionError is a table whose stored schema version is newer than the code opening it
// knows: it was written by a later engine, and this one refuses it rather than guess.
type TableVersionError struct {
	Table string
	// Have is the stored version, Know the version of the code.
	Have, Know int64
}

func (e *TableVersionError) Error() string {
	return fmt.Sprintf("kernel: record table %s has version %d, newer than this engine's %d", e.Table, e.Have, e.Know)
}

// Is makes errors.Is(err, ErrTableNewer) true.
func (e *TableVersionError) Is(target error) bool { return target == ErrTableNewer }

// RecordError is a stored record (or version) that cannot be read back. It matches
// loomtype.ErrCorrupt.
type RecordError struct {
	Table, Key string
	Err        error
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("kernel: record table %s, key %q: %v", e.Table, e.Key, e.Err)
}

// Unwrap makes a RecordError match loomtype.ErrCorrupt.
func (e *RecordError) Unwrap() error { return loomtype.ErrCorrupt }

// Tx is one write transaction of the kernel: every table write in it commits together or not at
// all, and none commits once the kernel's store is fenced.
type Tx struct{ tx store.Tx }

// Update runs fn in one write transaction of the kernel's store (the store given to Open, fenced
// if it was a fenced view). If fn returns an error nothing it did is kept. fn may run more than
// once when the store retries a commit: it must do nothing but read and write through tx.
//
// Errors: fn's error, store errors (store.ErrFenced once a newer lease exists).
//
//	err := k.Update(ctx, func(tx *kernel.Tx) error { return users.Put(tx, "u1", u) })
func (k *Kernel) Update(ctx context.Context, fn func(*Tx) error) error {
	return k.st.Update(ctx, func(tx store.Tx) error { return fn(&Tx{tx: tx}) })
}

// UpdateRelaxed is Update committing without waiting for the disk, when the kernel's store can
// (store.Relaxed; otherwise it is Update): a crash of the process keeps the commit, a crash of the
// machine may lose it and the relaxed commits after it, never a commit Update made nor anything
// before one. The transaction and its fencing are Update's. Use it for what can be made again or
// given up (a resume buffer), with LossEpoch to notice a loss.
//
// Errors: Update's.
//
//	err := k.UpdateRelaxed(ctx, func(tx *kernel.Tx) error { _, err := tx.AppendAux(id, "frames", h, evs...); return err })
func (k *Kernel) UpdateRelaxed(ctx context.Context, fn func(*Tx) error) error {
	return store.UpdateRelaxed(k.st, ctx, func(tx store.Tx) error { return fn(&Tx{tx: tx}) })
}

// LossEpoch is the loss epoch of the kernel's store (store.Relaxed): it goes up at an open after
// relaxed commits may have been lost. 0 for a store without relaxed commits.
//
//	if rec.Epoch != k.LossEpoch() { /* written before a possible loss */ }
func (k *Kernel) LossEpoch() int64 { return store.LossEpoch(k.st) }

// ErrNoSync is what SyncRelaxed answers for a store that cannot sync its relaxed commits apart
// from a commit (store.ErrNoSync): a commit made with Update is then the way to make them durable.
var ErrNoSync = store.ErrNoSync

// SyncRelaxed makes the relaxed commits made before it durable without holding up commits
// (store.SyncRelaxed): nil for a store without relaxed commits, ErrNoSync for one that cannot
// sync them apart from a commit.
//
//	if err := k.SyncRelaxed(ctx); err == nil { /* what UpdateRelaxed committed before is durable */ }
func (k *Kernel) SyncRelaxed(ctx context.Context) error { return store.SyncRelaxed(k.st, ctx) }

// Reader is what a record is read through: a *Kernel reads what is committed, a *Tx reads inside
// its transaction (its own writes included).
type Reader interface {
	readMeta(ctx context.Context, key string) ([]byte, bool, error)
}

func (k *Kernel) readMeta(ctx context.Context, key string) ([]byte, bool, error) {
	return k.st.Meta(ctx, key)
}

func (x *Tx) readMeta(_ context.Context, key string) ([]byte, bool, error) { return x.tx.Meta(key) }

// Table is a typed record table: records of type T (stored as JSON) by string key. A Table is a
// handle, made by NewTable and checked against the store by Open; it is safe for concurrent use.
type Table[T any] struct {
	name    string
	version int64
}

// Row is one record of a Scan.
type Row[T any] struct {
	Key   string
	Value T
}

// NewTable returns the handle of table name of records T at schema version (1 or more). It reads
// and writes nothing: Open the table on a kernel before using it there.
//
//	var texts = kernel.NewTable[string]("texts", 1)
func NewTable[T any](name string, version int64) Table[T] {
	return Table[T]{name: name, version: version}
}

// Open checks the table against k's store: it stores the table's version if the store has none or
// an older one, and refuses a stored version newer than the table's.
//
// Errors: ErrTableName (an invalid name or a version below 1), *TableVersionError
// (ErrTableNewer), *RecordError, store errors.
//
//	if err := texts.Open(ctx, k); err != nil { return err }
func (t Table[T]) Open(ctx context.Context, k *Kernel) error {
	if !validName(t.name) || t.version < 1 {
		return fmt.Errorf("%w: %q version %d", ErrTableName, t.name, t.version)
	}
	have, err := t.storedVersion(ctx, k)
	if err != nil || have == t.version {
		return err
	}
	return k.Update(ctx, func(tx *Tx) error {
		if _, err := t.storedVersion(ctx, tx); err != nil {
			return err
		}
		return tx.tx.PutMeta(versionKey(t.name), []byte(strconv.FormatInt(t.version, 10)))
	})
}

// storedVersion is the table's stored version (0: none), refused when newer than t's.
func (t Table[T]) storedVersion(ctx context.Context, r Reader) (int64, error) {
	b, ok, err := r.readMeta(ctx, versionKey(t.name))
	if err != nil || !ok {
		return 0, err
	}
	have, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return 0, &RecordError{Table: t.name, Key: versionKey(t.name), Err: err}
	}
	if have > t.version {
		return have, &TableVersionError{Table: t.name, Have: have, Know: t.version}
	}
	return have, nil
}

// Name is the table's name.
func (t Table[T]) Name() string { return t.name }

// Get reads the record under key; ok is false when there is none.
//
// Errors: ErrRecordKey, *RecordError (the stored record does not decode as T), store errors.
//
//	u, ok, err := users.Get(ctx, k, "u1")
func (t Table[T]) Get(ctx context.Context, r Reader, key string) (v T, ok bool, err error) {
	if key == "" {
		return v, false, ErrRecordKey
	}
	b, ok, err := r.readMeta(ctx, tableKey(t.name, key))
	if err != nil || !ok {
		return v, false, err
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, false, &RecordError{Table: t.name, Key: key, Err: err}
	}
	return v, true, nil
}

// Put stores v under key in tx, replacing what was there.
//
// Errors: ErrRecordKey, v does not encode as JSON, store errors.
//
//	err := users.Put(tx, "u1", u)
func (t Table[T]) Put(tx *Tx, key string, v T) error {
	if key == "" {
		return ErrRecordKey
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("kernel: record table %s, key %q: %w", t.name, key, err)
	}
	return tx.tx.PutMeta(tableKey(t.name, key), b)
}

// Delete removes the record under key in tx (nothing when there is none).
//
// Errors: ErrRecordKey, store errors.
//
//	err := users.Delete(tx, "u1")
func (t Table[T]) Delete(tx *Tx, key string) error {
	if key == "" {
		return ErrRecordKey
	}
	return tx.tx.DeleteMeta(tableKey(t.name, key))
}

// Scan returns the committed records whose key begins with prefix and sorts after after (""
// starts at the first), in byte order of their keys, at most limit of them (MaxScan when limit is
// not in 1..MaxScan). Fewer than the limit means there are no more.
//
// Errors: *RecordError, store errors.
//
//	rows, err := users.Scan(ctx, k, "", "", 0)
//	for len(rows) > 0 { ...; rows, err = users.Scan(ctx, k, "", rows[len(rows)-1].Key, 0) }
func (t Table[T]) Scan(ctx context.Context, k *Kernel, prefix, after string, limit int) ([]Row[T], error) {
	if limit <= 0 || limit > MaxScan {
		limit = MaxScan
	}
	space := tableSpace(t.name)
	kvs, err := k.st.MetaPrefix(ctx, space+prefix)
	if err != nil {
		return nil, err
	}
	var out []Row[T]
	for _, kv := range kvs {
		key := strings.TrimPrefix(kv.Key, space)
		if key <= after {
			continue
		}
		var v T
		if err := json.Unmarshal(kv.Val, &v); err != nil {
			return nil, &RecordError{Table: t.name, Key: key, Err: err}
		}
		if out = append(out, Row[T]{Key: key, Value: v}); len(out) == limit {
			break
		}
	}
	return out, nil
}

// All returns every committed record whose key begins with prefix, in byte order of their keys,
// reading them MaxScan at a time.
//
// Errors: as Scan.
//
//	rows, err := users.All(ctx, k, "")
func (t Table[T]) All(ctx context.Context, k *Kernel, prefix string) ([]Row[T], error) {
	var out []Row[T]
	after := ""
	for {
		rows, err := t.Scan(ctx, k, prefix, after, MaxScan)
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
		if len(rows) < MaxScan {
			return out, nil
		}
		after = rows[len(rows)-1].Key
	}
}

// ErrAdoptPrefix: AdoptMeta was asked for the empty prefix or one that reaches the kernel's own
// keys.
var ErrAdoptPrefix = errors.New("kernel: metadata prefix not adoptable")

// AdoptMeta brings metadata a layer stored in the store before it had record tables into them:
// in one transaction it hands fn every metadata pair whose key begins with prefix, by key order,
// and removes each pair fn adopts (fn writes what it keeps of it into its tables through tx; a
// pair it does not adopt stays as it is). fn may run more than once when the store retries the
// commit. It returns how many pairs it removed.
//
// Errors: ErrAdoptPrefix, fn's error (nothing is adopted), store errors.
//
//	n, err := k.AdoptMeta(ctx, "old/", func(tx *kernel.Tx, key string, val []byte) (bool, error) { ... })
func (k *Kernel) AdoptMeta(ctx context.Context, prefix string, fn func(tx *Tx, key string, val []byte) (adopt bool, err error)) (int, error) {
	if prefix == "" {
		return 0, ErrAdoptPrefix
	}
	for _, own := range []string{tablePrefix, versionPrefix, metaPrefix} {
		if strings.HasPrefix(prefix, own) || strings.HasPrefix(own, prefix) {
			return 0, fmt.Errorf("%w: %q", ErrAdoptPrefix, prefix)
		}
	}
	kvs, err := k.st.MetaPrefix(ctx, prefix)
	if err != nil || len(kvs) == 0 {
		return 0, err
	}
	n := 0
	err = k.Update(ctx, func(tx *Tx) error {
		n = 0
		for _, kv := range kvs {
			adopt, err := fn(tx, kv.Key, kv.Val)
			if err != nil {
				return err
			}
			if !adopt {
				continue
			}
			if err := tx.tx.DeleteMeta(kv.Key); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
