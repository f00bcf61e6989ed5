package queue

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"

	sqlite3 "github.com/mattn/go-sqlite3"
)

// rawConn is the writer's connection, used through the driver directly.
// The writer runs a few statements millions of times; database/sql's
// per-call work (context plumbing, argument conversion, locking, result
// wrapping) was a third of its cost.
type rawConn struct {
	c     *sqlite3.SQLiteConn
	stmts map[string]driver.Stmt // prepared statements, by text
	args  []driver.Value         // scratch for multi-row statements
}

func openRaw(dsn string) (*rawConn, error) {
	c, err := (&sqlite3.SQLiteDriver{}).Open(dsn)
	if err != nil {
		return nil, err
	}
	return &rawConn{c: c.(*sqlite3.SQLiteConn), stmts: map[string]driver.Stmt{}}, nil
}

func (r *rawConn) stmt(query string) (driver.Stmt, error) {
	if st, ok := r.stmts[query]; ok {
		return st, nil
	}
	st, err := r.c.Prepare(query)
	if err != nil {
		return nil, fmt.Errorf("prepare %q: %w", query, err)
	}
	r.stmts[query] = st
	return st, nil
}

// exec runs query and returns the rows it changed.
func (r *rawConn) exec(query string, args ...driver.Value) (int64, error) {
	st, err := r.stmt(query)
	if err != nil {
		return 0, err
	}
	res, err := st.Exec(args) //nolint:staticcheck // the driver's fast path
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// errNoRows is returned by queryRow when the query has no row.
var errNoRows = errors.New("no rows")

// queryRow runs query and fills dest from its first row.
func (r *rawConn) queryRow(query string, args []driver.Value, dest []driver.Value) error {
	st, err := r.stmt(query)
	if err != nil {
		return err
	}
	rows, err := st.Query(args) //nolint:staticcheck // the driver's fast path
	if err != nil {
		return err
	}
	defer rows.Close()
	if err := rows.Next(dest); err != nil {
		if errors.Is(err, io.EOF) {
			return errNoRows
		}
		return err
	}
	return nil
}

// scan runs query and calls fn with each row, until fn returns false or
// the rows end. It reports the rows seen and whether fn stopped early.
// The row slice is reused between calls.
func (r *rawConn) scan(query string, args []driver.Value, cols int, fn func(row []driver.Value) bool) (n int, cut bool, err error) {
	st, err := r.stmt(query)
	if err != nil {
		return 0, false, err
	}
	rows, err := st.Query(args) //nolint:staticcheck // the driver's fast path
	if err != nil {
		return 0, false, err
	}
	defer rows.Close()
	row := make([]driver.Value, cols)
	for {
		if err := rows.Next(row); err != nil {
			if errors.Is(err, io.EOF) {
				return n, false, nil
			}
			return n, false, err
		}
		n++
		if !fn(row) {
			return n, true, nil
		}
	}
}

func (r *rawConn) close() error {
	for _, st := range r.stmts {
		st.Close()
	}
	return r.c.Close()
}

// valuesSQL returns "(?, ?, ?), (?, ?, ?)" for rows rows of cols columns.
func valuesSQL(rows, cols int) string {
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", cols), ", ") + ")"
	return strings.TrimSuffix(strings.Repeat(one+", ", rows), ", ")
}
