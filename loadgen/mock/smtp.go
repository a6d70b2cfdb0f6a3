package mock

import (
	"io"
	"net"
	"strings"
	"sync"

	"github.com/emersion/go-smtp"
)

// SMTP is a real SMTP server on loopback that keeps what it is sent: the email lane's
// counterpart in tests. A recipient at nobody@ is refused as a server refuses an unknown
// mailbox (550 5.1.1).
type SMTP struct {
	Port int
	srv  *smtp.Server
	mu   sync.Mutex
	mail []Mail
}

// Mail is one message the server accepted.
type Mail struct {
	From string
	To   []string
	Data []byte // as sent: headers, then the body (quoted-printable as go-mail writes it)
}

// StartSMTP serves on a free loopback port until Close.
func StartSMTP() (*SMTP, error) {
	s := &SMTP{}
	s.srv = smtp.NewServer(smtpBackend{s})
	s.srv.Domain = "localhost"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.Port = ln.Addr().(*net.TCPAddr).Port
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Close stops the server.
func (s *SMTP) Close() error { return s.srv.Close() }

// Mails is what was accepted so far, in order.
func (s *SMTP) Mails() []Mail {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Mail(nil), s.mail...)
}

type smtpBackend struct{ s *SMTP }

func (b smtpBackend) NewSession(*smtp.Conn) (smtp.Session, error) { return &smtpSession{s: b.s}, nil }

type smtpSession struct {
	s *SMTP
	m Mail
}

func (x *smtpSession) Reset()                                      { x.m = Mail{} }
func (x *smtpSession) Logout() error                               { return nil }
func (x *smtpSession) Mail(from string, _ *smtp.MailOptions) error { x.m.From = from; return nil }
func (x *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	if strings.HasPrefix(to, "nobody@") {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user"}
	}
	x.m.To = append(x.m.To, to)
	return nil
}
func (x *smtpSession) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	x.m.Data = data
	x.s.mu.Lock()
	x.s.mail = append(x.s.mail, x.m)
	x.s.mu.Unlock()
	return nil
}
