package stream

import "strings"

// RouteInput is what decides who answers a message in a chat: the ids it mentions, in order
// ("assistant:x", "person:y"), the chat's assigned and default assistants, who spoke last, who
// sent it, and whether it is private (encrypted).
//
//	in := stream.RouteInput{Default: "assistant:kb", PreviousSpeaker: "person:bob", Sender: "person:alice"}
type RouteInput struct {
	Mentions        []string
	Assigned        string
	Default         string
	PreviousSpeaker string
	Sender          string
	Private         bool
}

// WhoAnswers lists the assistants that answer a message, in order:
//
//   - a private message: none, ever (no assistant can read it);
//   - else the mentioned assistants, in mention order, each once;
//   - else the assigned assistant, when there is one;
//   - else the default assistant, unless a person is talking to a person: the previous speaker
//     is a person other than the sender, or the message mentions a person other than the
//     sender; then none.
//
// None is an empty list (nil). Pure.
//
//	who := stream.WhoAnswers(stream.RouteInput{Mentions: []string{"assistant:kb"}, Sender: "person:alice"}) // [assistant:kb]
func WhoAnswers(in RouteInput) []string {
	if in.Private {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	personMentioned := false
	for _, m := range in.Mentions {
		switch {
		case strings.HasPrefix(m, "assistant:"):
			if !seen[m] {
				seen[m] = true
				out = append(out, m)
			}
		case strings.HasPrefix(m, "person:") && m != in.Sender:
			personMentioned = true
		}
	}
	if len(out) > 0 {
		return out
	}
	if in.Assigned != "" {
		return []string{in.Assigned}
	}
	if in.Default == "" || personMentioned {
		return nil
	}
	if strings.HasPrefix(in.PreviousSpeaker, "person:") && in.PreviousSpeaker != in.Sender {
		return nil
	}
	return []string{in.Default}
}
