// Package email sends the new-conversation notification to a site's address over SMTP with
// go-mail. Volume is one mail per new conversation, so each send dials its own connection.
package email

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	mail "github.com/wneessen/go-mail"

	"spookat/schema"
	"spookat/worker/internal/deliver"
)

// Config of the SMTP relay.
type Config struct {
	Host     string
	Port     int
	User     string
	Password string
	TLS      string // none | starttls (opportunistic) | mandatory (STARTTLS required) | tls (implicit, port 465)
	From     string
}

// Sender sends notifications.
type Sender struct{ cfg Config }

// New validates the TLS policy.
func New(cfg Config) (*Sender, error) {
	switch cfg.TLS {
	case "", "none", "starttls", "mandatory", "tls":
	default:
		return nil, fmt.Errorf("smtp tls %q: want none, starttls, mandatory or tls", cfg.TLS)
	}
	return &Sender{cfg: cfg}, nil
}

func (s *Sender) client() (*mail.Client, error) {
	opts := []mail.Option{mail.WithPort(s.cfg.Port)}
	switch s.cfg.TLS {
	case "", "none":
		opts = append(opts, mail.WithTLSPolicy(mail.NoTLS))
	case "starttls":
		opts = append(opts, mail.WithTLSPolicy(mail.TLSOpportunistic))
	case "mandatory":
		opts = append(opts, mail.WithTLSPolicy(mail.TLSMandatory))
	case "tls":
		opts = append(opts, mail.WithSSL())
	}
	if s.cfg.User != "" {
		opts = append(opts, mail.WithSMTPAuth(mail.SMTPAuthAutoDiscover),
			mail.WithUsername(s.cfg.User), mail.WithPassword(s.cfg.Password))
	}
	return mail.NewClient(s.cfg.Host, opts...)
}

// Send mails the first message of a conversation to the site's notify address, or, for a job
// with To set, an operator's reply to a visitor who left that address and was not connected,
// the conversation itself to a visitor who asked for it (Transcript), or an owner's
// invitation to join the site's team (Invite).
func (s *Sender) Send(ctx context.Context, deadline time.Time, site *schema.SiteDelivery, jobs []*schema.Job) deliver.Outcome {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	j := jobs[0]
	to := j.To
	if to == "" {
		to = site.NotifyEmail
	}
	if to == "" {
		return deliver.Permanent(deliver.ErrNotConfigured)
	}
	if s.cfg.Host == "" {
		return deliver.Fail(errors.New("no SMTP host configured (-smtp-host)"))
	}
	m := mail.NewMsg()
	if err := m.From(s.cfg.From); err != nil {
		return deliver.Permanent(fmt.Errorf("smtp from: %w", err))
	}
	if err := m.To(to); err != nil {
		return deliver.Permanent(fmt.Errorf("recipient address: %w", err))
	}
	name := site.Name
	if name == "" {
		name = "your site"
	}
	m.SetMessageIDWithValue(j.ID + "@spookat")
	m.SetDate()
	var b strings.Builder
	if n := j.Notice; n != nil {
		m.Subject(n.Subject)
		b.WriteString(n.Text + "\n")
	} else if inv := j.Invite; inv != nil && j.To != "" {
		m.Subject("Join " + inv.Site + " on spookat")
		what := "answer its visitors' chats"
		if inv.Role == "owner" {
			what = "answer its visitors' chats and manage its settings"
		}
		b.WriteString(inv.By + " invited you to " + what + " (" + inv.Site + ", as " + inv.Role + ").\n\n")
		b.WriteString("Choose your password and log in:\n" + inv.Link + "\n\n")
		b.WriteString("The link works once and until " + inv.Expires.UTC().Format("Mon 2 Jan 15:04") + " UTC. ")
		b.WriteString("If you did not expect it, ignore this email: nothing happens without it.\n")
	} else if t := j.Transcript; t != nil && j.To != "" {
		m.Subject("Your conversation with " + name)
		b.WriteString("Here is your conversation with " + name + ", as you asked.\n\n")
		if t.Earlier > 0 {
			b.WriteString("(" + strconv.Itoa(t.Earlier) + " earlier messages are not included.)\n\n")
		}
		for _, l := range t.Lines {
			who := l.Name
			switch {
			case l.Author == schema.AuthorVisitor:
				who = "You"
			case who == "":
				who = name
			}
			b.WriteString(l.At.Format("2 Jan 15:04") + " UTC · " + who + ":\n")
			if l.Text != "" {
				b.WriteString(l.Text + "\n")
			}
			if l.File != "" {
				b.WriteString("[attachment: " + l.File + "]\n")
			}
			b.WriteString("\n")
		}
	} else if j.To != "" {
		who := j.Name
		if who == "" {
			who = "The team"
		}
		m.Subject("Reply from " + name)
		b.WriteString(who + " answered your message on " + name + ":\n\n")
		b.WriteString(j.Text)
		b.WriteString("\n")
		attachment(&b, j)
	} else {
		m.Subject("New conversation on " + name)
		who := j.Name
		if who == "" {
			who = "A visitor"
		}
		b.WriteString(who + " started conversation #" + strconv.FormatInt(j.ConversationID, 10) + " on " + name + ":\n\n")
		b.WriteString(j.Text)
		b.WriteString("\n")
		attachment(&b, j)
		if c := j.Context; c != nil {
			b.WriteString("\nStarted on: " + c.URL)
			if c.Title != "" {
				b.WriteString(" (" + c.Title + ")")
			}
			if facts := c.Facts(); len(facts) > 0 {
				b.WriteString("\nVisitor: " + strings.Join(facts, " · "))
			}
			b.WriteString("\n")
		}
		if j.InboxURL != "" {
			b.WriteString("\nAnswer in the inbox: " + j.InboxURL + "\n")
		}
	}
	m.SetBodyString(mail.TypeTextPlain, b.String())
	c, err := s.client()
	if err != nil {
		return deliver.Permanent(err)
	}
	if err := c.DialAndSendWithContext(ctx, m); err != nil {
		var se *mail.SendError
		if errors.As(err, &se) && !se.IsTemp() && se.ErrorCode() >= 500 {
			return deliver.Permanent(err)
		}
		return deliver.Fail(err)
	}
	return deliver.Outcome{ExternalID: j.ID + "@spookat"}
}

// attachment names the message's file and its link (it expires in 7 days).
func attachment(b *strings.Builder, j *schema.Job) {
	if f := j.File; f != nil {
		b.WriteString("\nAttachment: " + f.Name + " (" + f.SizeText() + "), for 7 days at " + f.URL + "\n")
	}
}
