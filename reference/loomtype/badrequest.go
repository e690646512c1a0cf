package loomtype

// BadRequestError is a request refused for one of its fields. It matches ErrBadRequest, so
// errors.Is(err, ErrBadRequest) holds for it; errors.As finds the field.
//
//	var br *loomtype.BadRequestError
//	if errors.As(err, &br) { fmt.Println("bad field:", br.Field) }
type BadRequestError struct {
	// Field names the request field at fault ("messageId", "mode", "participants", ...).
	Field string
	// Reason says what is wrong with it, when the field's name alone does not say ("unknown
	// mode"); empty when the name is the whole story.
	Reason string
}

// BadRequest returns the *BadRequestError for field, with reason (which may be empty).
//
//	return loomtype.BadRequest("messageId", "")
func BadRequest(field, reason string) error { return &BadRequestError{Field: field, Reason: reason} }

// Detail is what an answer shows of the refusal: the reason, or the field's name when there is
// none.
func (e *BadRequestError) Detail() string {
	if e.Reason != "" {
		return e.Reason
	}
	return e.Field
}

func (e *BadRequestError) Error() string { return ErrBadRequest.Error() + ": " + e.Detail() }

// Is makes errors.Is(err, ErrBadRequest) true.
func (e *BadRequestError) Is(target error) bool { return target == ErrBadRequest }
