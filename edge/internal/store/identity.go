package store

import (
	"crypto/rand"
	"crypto/sha256"
)

// Identity is what a site's page says of its logged-in user (the widget's identify).
type Identity struct {
	UserID   string
	Email    string
	Name     string
	Verified bool // user_hash matched the site's identity secret
}

// IdentifyVisitor applies an identify inside the writer's transaction and returns the visitor
// the socket now speaks for, with its conversation's state.
//
// Verified, the site's user has one visitor: the one already verified as this user (another
// device's); else the socket's own visitor, which becomes this user's; else (the socket's
// visitor is not stored yet) a new one under the socket's token hash. Not verified, the claims
// are written on the socket's own visitor, flagged unverified, and never matched: current 0
// (not stored yet) writes nothing and returns found false.
func (tx *Tx) IdentifyVisitor(siteID, current int64, tokenHash []byte, id Identity) (st VisitorState, found bool, err error) {
	if current == 0 && tokenHash != nil {
		// The socket's first message may have stored its visitor in this same transaction.
		if _, err := tx.QueryRow(`SELECT id FROM visitors WHERE token_hash = ? AND site_id = ?`,
			[]any{tokenHash, siteID}, &current); err != nil {
			return VisitorState{}, false, err
		}
	}
	if !id.Verified {
		if current == 0 {
			return VisitorState{}, false, nil
		}
		err = tx.exec(`UPDATE visitors SET user_id = ?, name = ?, email = CASE WHEN ? = '' THEN email ELSE ? END
			WHERE id = ? AND verified = 0`, id.UserID, id.Name, id.Email, id.Email, current)
		if err != nil {
			return VisitorState{}, false, err
		}
		return tx.visitorState(current)
	}
	var user int64
	found, err = tx.QueryRow(`SELECT id FROM visitors WHERE site_id = ? AND user_id = ? AND verified = 1`,
		[]any{siteID, id.UserID}, &user)
	if err != nil {
		return VisitorState{}, false, err
	}
	switch {
	case found:
	case current != 0:
		if err := tx.exec(`UPDATE visitors SET user_id = ?, verified = 1 WHERE id = ? AND verified = 0`, id.UserID, current); err != nil {
			return VisitorState{}, false, err
		}
		if tx.c.Changes() == 1 {
			user = current
			break
		}
		fallthrough // the socket's visitor is another verified user: this one gets a visitor of its own
	default:
		hash := tokenHash
		if current != 0 || hash == nil {
			// No device holds a token for it: the user's devices reach it by identify.
			b := make([]byte, 32)
			rand.Read(b)
			sum := sha256.Sum256(b)
			hash = sum[:]
		}
		if _, err := tx.QueryRow(`INSERT INTO visitors (site_id, token_hash, user_id, verified, created_at)
			VALUES (?, ?, ?, 1, ?) RETURNING id`, []any{siteID, hash, id.UserID, tx.now}, &user); err != nil {
			return VisitorState{}, false, err
		}
	}
	if err := tx.exec(`UPDATE visitors SET name = CASE WHEN ?1 = '' THEN name ELSE ?1 END,
		email = CASE WHEN ?2 = '' THEN email ELSE ?2 END WHERE id = ?3`, id.Name, id.Email, user); err != nil {
		return VisitorState{}, false, err
	}
	return tx.visitorState(user)
}

// visitorState is VisitorByToken's answer for a visitor id, inside the writer's transaction.
func (tx *Tx) visitorState(visitorID int64) (v VisitorState, found bool, err error) {
	found, err = tx.QueryRow(visitorStateFrom+`WHERE v.id = ?`, []any{visitorID}, v.dest()...)
	return v, found, err
}
