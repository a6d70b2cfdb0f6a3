package sqlitenative

import (
	"context"
	"database/sql/driver"

	mattn "github.com/mattn/go-sqlite3"
	"github.com/ncruces/go-sqlite3"
)

type ncrucesConn struct{ c *sqlite3.Conn }

func openNcruces(path string) (conn, error) {
	c, err := sqlite3.Open(path)
	return ncrucesConn{c}, err
}

func (n ncrucesConn) exec(q string) error { return n.c.Exec(q) }
func (n ncrucesConn) close() error        { return n.c.Close() }
func (n ncrucesConn) prepare(q string) (stmt, error) {
	s, _, err := n.c.Prepare(q)
	return ncrucesStmt{s}, err
}

type ncrucesStmt struct{ s *sqlite3.Stmt }

func (n ncrucesStmt) close() error { return n.s.Close() }
func (n ncrucesStmt) exec(args ...any) error {
	for i, a := range args {
		var err error
		switch v := a.(type) {
		case int64:
			err = n.s.BindInt64(i+1, v)
		case string:
			err = n.s.BindText(i+1, v)
		case nil:
			err = n.s.BindNull(i + 1)
		}
		if err != nil {
			return err
		}
	}
	return n.s.Exec()
}

type cgoConn struct{ c *mattn.SQLiteConn }

func openCgo(path string) (conn, error) {
	c, err := (&mattn.SQLiteDriver{}).Open(path)
	if err != nil {
		return nil, err
	}
	return cgoConn{c.(*mattn.SQLiteConn)}, nil
}

func (m cgoConn) exec(q string) error {
	_, err := m.c.ExecContext(context.Background(), q, nil)
	return err
}
func (m cgoConn) close() error { return m.c.Close() }
func (m cgoConn) prepare(q string) (stmt, error) {
	s, err := m.c.Prepare(q)
	return cgoStmt{s.(driver.StmtExecContext), s, make([]driver.NamedValue, 11)}, err
}

type cgoStmt struct {
	s    driver.StmtExecContext
	c    driver.Stmt
	args []driver.NamedValue
}

func (m cgoStmt) close() error { return m.c.Close() }
func (m cgoStmt) exec(args ...any) error {
	nv := m.args[:len(args)]
	for i, a := range args {
		nv[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
	}
	_, err := m.s.ExecContext(context.Background(), nv)
	return err
}
