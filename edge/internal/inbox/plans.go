package inbox

import (
	"spookat/edge/internal/plans"
	"spookat/edge/internal/store"
)

// Plans is what the inbox asks of a hosted install's plans (plans.Book).
type Plans interface {
	CheckOperators(siteID int64, members int) error
	CheckRetention(siteID int64, days int) error
	Usage(siteID int64) plans.Usage
}

// planError is a plan's refusal: 409 plan_limit with its sentence.
type planError string

func (e planError) Error() string { return string(e) }

// planSeats refuses one more member of a site (an invitation: invitations not yet used count
// too) past its plan's operators.
func (h *Handler) planSeats(tx *store.Tx, siteID int64, invitesToo bool) error {
	if h.Plans == nil {
		return nil
	}
	n, err := tx.Seats(siteID, invitesToo)
	if err != nil {
		return err
	}
	if err := h.Plans.CheckOperators(siteID, n); err != nil {
		return planError(sentence(err))
	}
	return nil
}
