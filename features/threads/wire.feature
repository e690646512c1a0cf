Feature: The wire between two boxes
  As the operator of a box that talks with a peer box
  I want every text between them to have one plain shape and one plain answer
  So that either side can be built, checked and retried without knowing the other's insides

  A text is posted to the peer's texts endpoint with the connection's send token. It names its
  agent conversation by an opaque random thread id, itself by a message id, the sending and the
  receiving role, and carries the text. The receiver acknowledges a stored text, answers a text it
  already has the same way, and rejects a malformed or unauthorized one with a reason.

  Background:
    Given the box is connected to the peer "lab"

  @profile:threads @req:ADR0035-W-01
  Scenario: A sent text has the wire's shape, and two roots get two threads that owe nothing to their roots
    Given the model answers "Ask the analyst about the north" by sending {"to": "lab/analyst", "text": "What is in the north?"}, then says "I asked."
    And the model answers "Ask the analyst about the south" by sending {"to": "lab/analyst", "text": "What is in the south?"}, then says "I asked too."
    When "alice" says "Ask the analyst about the north" to "planner"
    Then the peer has received 1 text
    And received text 1 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message north}", "from": "planner", "to": "analyst", "text": "What is in the north?"}
      """
    When "bob" says "Ask the analyst about the south" to "planner"
    Then the peer has received 2 texts
    And received text 2 is exactly:
      """
      {"v": 1, "thread": "{thread B}", "message": "{message south}", "from": "planner", "to": "analyst", "text": "What is in the south?"}
      """
    And threads "A" and "B" are different
    And the peer found every text well-formed

  @profile:threads @req:ADR0035-W-02
  Scenario: The acknowledgement names the text, and the same message again adds nothing
    Given the model replies "Noted." to "The pumps are fine."
    And the model replies "Noted too." to "The valves are fine."
    When the peer sends "The pumps are fine." from "analyst" to "planner" on thread "P"
    Then the answer is 200 ack
    When the peer sends the same text again
    Then the answer is the same as before
    And the answer is 200 ack
    And turn 1 of thread "P" is completed
    # A later text is the sentinel: an agent conversation has one turn at a time, and the next turn
    # takes every text waiting then (spec/peer.md, Receiving), so a turn for the repeat would come
    # before the turn of "The valves are fine.", or the repeat would be taken with it.
    When the peer sends "The valves are fine." from "analyst" to "planner" on thread "P"
    Then the answer is 200 ack
    And turn 2 of thread "P" is completed
    And "dana" sees the agent conversation of thread "P" as:
      """
      {"id": "{ac P}", "connection": "lab", "thread": "{thread P}", "role": "planner", "peerRole": "analyst",
       "startedBy": "peer", "root": {"kind": "agent", "id": "{ac P}"}, "state": "open",
       "texts": [{"dir": "in", "message": "{message The pumps are fine.}", "text": "The pumps are fine.", "state": "received"},
                 {"dir": "in", "message": "{message The valves are fine.}", "text": "The valves are fine.", "state": "received"}],
       "turns": [{"turn": 1, "status": "completed", "texts": ["{message The pumps are fine.}"], "output": "Noted."},
                 {"turn": 2, "status": "completed", "texts": ["{message The valves are fine.}"], "output": "Noted too."}]}
      """

  @profile:threads @req:ADR0035-W-02 @fresh-system
  Scenario: A message id the connection already delivered, sent on another thread, gets the first answer and adds nothing
    Given the model replies "Noted." to "The pumps are fine."
    When the peer posts {"v": 1, "thread": "t_0123456789abcdef", "message": "m1", "from": "analyst", "to": "planner", "text": "The pumps are fine."}
    Then the answer is exactly 200 {"ack": true, "thread": "t_0123456789abcdef", "message": "m1"}
    # Message ids are unique per connection and sender (spec/peer.md, The wire): the same one on
    # another thread is the text already delivered, answered as it was the first time.
    When the peer posts {"v": 1, "thread": "t_fedcba9876543210", "message": "m1", "from": "analyst", "to": "planner", "text": "The pumps are fine."}
    Then the answer is exactly 200 {"ack": true, "thread": "t_0123456789abcdef", "message": "m1"}
    And nothing is stored on thread "t_fedcba9876543210"

  @profile:threads @req:ADR0035-W-02 @configures
  Scenario: A message id another connection already used is a new text on this one
    # Message ids are unique per connection and sender (spec/peer.md, The wire): the same id on
    # another connection names another text, stored and answered as its own.
    Given the box has a second connection "field" to the same peer
    And the model replies "Noted." to "The pumps are fine."
    And the model replies "Noted too." to "The valves are fine."
    When the peer posts {"v": 1, "thread": "t_0123456789abcdef", "message": "m1", "from": "analyst", "to": "planner", "text": "The pumps are fine."}
    Then the answer is exactly 200 {"ack": true, "thread": "t_0123456789abcdef", "message": "m1"}
    When the peer posts on the connection "field" {"v": 1, "thread": "t_fedcba9876543210", "message": "m1", "from": "analyst", "to": "planner", "text": "The valves are fine."}
    Then the answer is exactly 200 {"ack": true, "thread": "t_fedcba9876543210", "message": "m1"}
    And the model has been asked 2 times
    And some message of a request to the model holds "The valves are fine."

  @profile:threads @req:ADR0035-W-02
  Scenario: A text that waits behind a running turn, sent again, is stored once and taken once
    Given the model replies "Still working." to "Count every grain of sand" after a release
    And the model replies "Noted." to "And the stars."
    When the peer sends "Count every grain of sand" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    And turn 1 of thread "K" is running
    When the peer sends "And the stars." from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    When the peer sends the same text again
    Then the answer is the same as before
    And the answer is 200 ack
    When the model is released
    # The turn after the running one is the sentinel: it takes every text waiting then
    # (spec/peer.md, Receiving), so a second copy of "And the stars." would be taken with it.
    Then turn 2 of thread "K" is completed
    And thread "K" has exactly 2 turns, the last of which took only "And the stars."
    And "dana" sees the agent conversation of thread "K" as:
      """
      {"id": "{ac K}", "connection": "lab", "thread": "{thread K}", "role": "planner", "peerRole": "analyst",
       "startedBy": "peer", "root": {"kind": "agent", "id": "{ac K}"}, "state": "open",
       "texts": [{"dir": "in", "message": "{message Count every grain of sand}", "text": "Count every grain of sand", "state": "received"},
                 {"dir": "in", "message": "{message And the stars.}", "text": "And the stars.", "state": "received"}],
       "turns": [{"turn": 1, "status": "completed", "texts": ["{message Count every grain of sand}"], "output": "Still working."},
                 {"turn": 2, "status": "completed", "texts": ["{message And the stars.}"], "output": "Noted."}]}
      """

  @profile:threads @req:ADR0035-W-03 @fresh-system
  Scenario Outline: A malformed text is rejected naming its first bad member, and nothing is stored
    When the peer posts <body>
    Then the answer is 400 bad-request "<member>"
    And nothing is stored on thread "t_0123456789abcdef"

    Examples:
      | body                                                                                                           | member  |
      | {"thread": "t_0123456789abcdef", "message": "m1", "from": "analyst", "to": "planner", "text": "hi"}            | v       |
      | {"v": 2, "thread": "t_0123456789abcdef", "message": "m1", "from": "analyst", "to": "planner", "text": "hi"}    | v       |
      | {"v": 1, "message": "m1", "from": "analyst", "to": "planner", "text": "hi"}                                    | thread  |
      | {"v": 1, "thread": "t_short", "message": "m1", "from": "analyst", "to": "planner", "text": "hi"}               | thread  |
      | {"v": 1, "thread": "t_0123456789abcdef/", "message": "m1", "from": "analyst", "to": "planner", "text": "hi"}   | thread  |
      | {"v": 1, "thread": 12345678901234567890, "message": "m1", "from": "analyst", "to": "planner", "text": "hi"}    | thread  |
      | {"v": 1, "thread": "t_0123456789abcdef", "from": "analyst", "to": "planner", "text": "hi"}                     | message |
      | {"v": 1, "thread": "t_0123456789abcdef", "message": "", "from": "analyst", "to": "planner", "text": "hi"}      | message |
      | {"v": 1, "thread": "t_0123456789abcdef", "message": "m 1", "from": "analyst", "to": "planner", "text": "hi"}   | message |
      | {"v": 1, "thread": "t_0123456789abcdef", "message": "m1", "to": "planner", "text": "hi"}                       | from    |
      | {"v": 1, "thread": "t_0123456789abcdef", "message": "m1", "from": "analyst", "text": "hi"}                     | to      |
      | {"v": 1, "thread": "t_0123456789abcdef", "message": "m1", "from": "analyst", "to": "planner"}                  | text    |
      | {"v": 1, "thread": "t_0123456789abcdef", "message": "m1", "from": "analyst", "to": "planner", "text": ""}      | text    |
      | {"v": 1, "thread": "t_0123456789abcdef", "message": "m1", "from": "analyst", "to": "planner", "text": 7}       | text    |
      | {"v": 1, "message": "", "from": "analyst", "to": "planner", "text": ""}                                        | thread  |

  @profile:threads @req:ADR0035-W-07 @fresh-system
  Scenario Outline: A text is decoded strictly: a member named twice, a member the wire does not have, or anything after the body is rejected, and nothing is stored
    When the peer posts <body>
    Then the answer is 400 bad-request "<member>"
    And nothing is stored on thread "t_0123456789abcdef"

    Examples:
      | body                                                                                                                          | member |
      | {"v": 1, "thread": "t_0123456789abcdef", "message": "m1", "from": "analyst", "to": "planner", "text": "hi", "text": "ho"}     | text   |
      | {"v": 1, "thread": "t_0123456789abcdef", "message": "m1", "from": "analyst", "to": "planner", "text": "hi", "priority": 9}    | priority |
      | {"v": 1, "thread": "t_0123456789abcdef", "message": "m1", "from": "analyst", "to": "planner", "text": "hi", "Text": "ho"}     | Text   |
      | {"v": 1, "thread": "t_0123456789abcdef", "message": "m1", "from": "analyst", "to": "planner", "text": "hi"} {"v": 1}          | body   |

  @profile:threads @req:ADR0035-W-03 @fresh-system
  Scenario: A text of 16384 bytes is taken, one byte more is rejected
    When the peer posts a text of 16384 bytes on thread "L"
    Then the answer is 200 ack
    When the peer posts a text of 16385 bytes on thread "M"
    Then the answer is 400 bad-request "text"
    And nothing is stored on thread "M"

  @profile:threads @req:ADR0035-W-03 @fresh-system
  Scenario: No token, an unknown one or the wrong one is rejected as connection; an unknown role as role
    When the peer posts a text on thread "N" with no token
    Then the answer is 401 "connection"
    When the peer posts a text on thread "N" with the token "lab-guess"
    Then the answer is 401 "connection"
    When the peer posts a text on thread "N" with the send token
    Then the answer is 401 "connection"
    When the peer sends "Hello?" from "analyst" to "cook" on thread "R"
    Then the answer is 404 "role"
    And nothing is stored on thread "N"
    And nothing is stored on thread "R"

  @profile:threads @req:ADR0035-W-03 @configures
  Scenario: The token of a revoked connection is rejected as connection
    When "olga" revokes the connection "lab"
    Then the answer is the connection "lab" revoked
    When the peer sends "Still there?" from "analyst" to "planner" on thread "V"
    Then the answer is 401 "connection"
    And nothing is stored on thread "V"

  @profile:threads @req:ADR0035-W-04
  Scenario: 503 and 429 are tried again under the same message id until delivered
    Given the peer answers the next 1 text with 503 "unavailable"
    And the peer answers the next 1 text with 429 "busy"
    And the model answers "Ask the analyst" by sending {"to": "lab/analyst", "text": "Any news?"}, then says "Asked."
    And the model answers "Ask again" by sending {"to": "lab/analyst", "text": "Anything more?"}, then says "Asked again."
    When "alice" says "Ask the analyst" to "planner"
    Then the peer has received 3 texts
    And received text 1 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message news}", "from": "planner", "to": "analyst", "text": "Any news?"}
      """
    And received text 2 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message news}", "from": "planner", "to": "analyst", "text": "Any news?"}
      """
    And received text 3 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message news}", "from": "planner", "to": "analyst", "text": "Any news?"}
      """
    And the text "Any news?" on thread "A" is sent
    # A later text of the same agent conversation is the sentinel: it is sent only after every
    # earlier one was delivered or failed, and a text answered 200 is delivered (spec/peer.md, The
    # wire). Had the sender tried "Any news?" after its 200, the peer would have had it first.
    When "alice" says "Ask again" to "planner"
    Then the peer has received exactly 4 texts once "Anything more?" has arrived
    And received text 4 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message more}", "from": "planner", "to": "analyst", "text": "Anything more?"}
      """
    And the peer found every text well-formed

  @profile:threads @req:ADR0035-W-04 @fresh-system
  Scenario Outline: A final rejection fails the text with its reason, and the role's next turn is told
    Given the peer answers the next 1 text with <status> "<reason>"
    And the model answers "Ask the analyst" by sending {"to": "lab/analyst", "text": "Any news?"}, then says "Asked."
    And the model answers "Here is news." by sending {"to": "lab/analyst", "text": "Thanks for the news."}, then says "Understood."
    When "alice" says "Ask the analyst" to "planner"
    Then the peer has received 1 text
    And received text 1 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message news}", "from": "planner", "to": "analyst", "text": "Any news?"}
      """
    And the text "Any news?" on thread "A" is failed with "<reason>"
    When the peer answers "Here is news." on thread "A"
    Then the answer is 200 ack
    And model request 1 for "Here is news." holds exactly:
      | role   | content                                                                                                  |
      | system | You plan the work.                                                                                       |
      | system | You are planner, in agent conversation {ac A} with lab/analyst. It answers for the conversation of alice. |
      | system | Your text {message news} failed: <reason>.                                                               |
      | user   | Here is news.                                                                                            |
    # The turn's own send is the sentinel: a later text of the same agent conversation, sent only
    # after every earlier one was delivered or failed (spec/peer.md, The wire). Had the sender
    # tried "Any news?" again after its final rejection (a paused one included: only 429, 5xx and
    # a failed connection are tried again), the peer would have had it first.
    And the peer has received exactly 2 texts once "Thanks for the news." has arrived
    And received text 2 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message thanks}", "from": "planner", "to": "analyst", "text": "Thanks for the news."}
      """

    Examples:
      | status | reason     |
      | 409    | roles      |
      | 409    | paused     |
      | 404    | role       |
      | 401    | connection |

  @profile:threads @req:ADR0035-W-05 @fresh-system
  Scenario: A text the peer holds holds up only the later texts of its own agent conversation
    Given the peer holds the next text
    And the model answers "Ask twice" by sending {"to": "lab/analyst", "text": "first"} and {"to": "lab/analyst", "text": "second"}, then says "Asked twice."
    And the model answers "Bob asks" by sending {"to": "lab/analyst", "text": "third"}, then says "Asked."
    When "alice" says "Ask twice" to "planner"
    Then the peer has received 1 text
    And received text 1 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message first}", "from": "planner", "to": "analyst", "text": "first"}
      """
    When "bob" says "Bob asks" to "planner"
    Then the peer has received 2 texts
    And received text 2 is exactly:
      """
      {"v": 1, "thread": "{thread B}", "message": "{message third}", "from": "planner", "to": "analyst", "text": "third"}
      """
    And threads "A" and "B" are different
    # No sentinel: this is the ordering every sentinel of the other scenarios relies on, so the kit
    # holds "first" and waits.
    And after 3 seconds the peer has still received 2 texts
    And the text "second" on thread "A" is queued
    When the peer releases the held texts
    Then the peer has received 3 texts
    And received text 3 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message second}", "from": "planner", "to": "analyst", "text": "second"}
      """

  @profile:threads @req:ADR0035-W-05 @fresh-system
  Scenario Outline: A text the peer answers <status> is tried again before any later text of its agent conversation
    Given the peer holds the next text
    And the peer answers the next 1 text with <status> "<reason>"
    And the model answers "Ask the analyst" by sending {"to": "lab/analyst", "text": "zero"}, then says "Asked."
    And the model answers "Ask twice" by sending {"to": "lab/analyst", "text": "first"} and {"to": "lab/analyst", "text": "second"}, then says "Asked twice."
    When "alice" says "Ask the analyst" to "planner"
    Then the peer has received 1 text
    And received text 1 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message zero}", "from": "planner", "to": "analyst", "text": "zero"}
      """
    # "first" and "second" wait behind "zero", so both are waiting when "first" is answered <status>.
    When "alice" says "Ask twice" to "planner"
    Then the text "second" on thread "A" is queued
    When the peer releases the held texts
    # "second" is the sentinel: it is sent only after "first" was delivered (spec/peer.md, The
    # wire), so "first" must have been tried again, and taken, before it.
    Then the peer has received exactly 4 texts once "second" has arrived
    And received text 2 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message first}", "from": "planner", "to": "analyst", "text": "first"}
      """
    And received text 3 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message first}", "from": "planner", "to": "analyst", "text": "first"}
      """
    And received text 4 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message second}", "from": "planner", "to": "analyst", "text": "second"}
      """
    And the text "first" on thread "A" is sent
    And the text "second" on thread "A" is sent

    Examples:
      | status | reason      |
      | 503    | unavailable |
      | 429    | busy        |

  @profile:threads @req:ADR0035-W-06 @configures
  Scenario: With as many texts of the connection waiting for a turn as its bound, the next is 429 busy, stores nothing, and is taken when sent again later
    Given the connection "lab" holds at most 2 waiting texts
    And the model replies "Working on one." to "one" after a release
    And the model replies "Took two and three." to "three"
    And the model replies "Four, at last." to "four"
    And the model replies "Five it is." to "five"
    When the peer sends "one" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    And turn 1 of thread "K" is running
    When the peer sends "two" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    When the peer sends "three" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    When the peer sends "four" from "analyst" to "planner" on thread "Q"
    Then the answer is 429 "busy"
    When the model is released
    Then turn 2 of thread "K" is completed
    When the peer sends the same text again
    Then the answer is 200 ack
    And turn 1 of thread "Q" is completed
    And "dana" sees the agent conversation of thread "Q" as:
      """
      {"id": "{ac Q}", "connection": "lab", "thread": "{thread Q}", "role": "planner", "peerRole": "analyst",
       "startedBy": "peer", "root": {"kind": "agent", "id": "{ac Q}"}, "state": "open",
       "texts": [{"dir": "in", "message": "{message four}", "text": "four", "state": "received"}],
       "turns": [{"turn": 1, "status": "completed", "texts": ["{message four}"], "output": "Four, at last."}]}
      """
    # A later text of thread "K" is the sentinel: one turn at a time, the next taking every text
    # waiting then (spec/peer.md, Receiving), so a third turn would come before the turn of "five",
    # and a text left waiting would be taken with it.
    When the peer sends "five" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    And turn 3 of thread "K" is completed
    And thread "K" has exactly 3 turns, the last of which took only "five"

  @profile:threads @req:ADR0035-W-06
  Scenario: The default bound: 64 texts of the connection wait for a turn, and the 65th is 429 busy
    Given the model replies "Working on one." to "one" after a release
    And the model replies "Took all 64." to "text 64"
    And the model replies "Now the last." to "the last"
    And the model replies "One more, done." to "one more"
    When the peer sends "one" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    And turn 1 of thread "K" is running
    When the peer sends 64 texts from "analyst" to "planner" on thread "K", each acknowledged
    And the peer sends "the last" from "analyst" to "planner" on thread "Q"
    Then the answer is 429 "busy"
    When the model is released
    Then turn 2 of thread "K" is completed
    When the peer sends the same text again
    Then the answer is 200 ack
    And turn 1 of thread "Q" is completed
    # The sentinel, as above: a later text of thread "K".
    When the peer sends "one more" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    And turn 3 of thread "K" is completed
    And thread "K" has exactly 3 turns, the last of which took only "one more"

  @profile:threads @req:ADR0035-W-02
  Scenario: A delivered text presented again after its agent conversation closed gets its first answer
    Given the model answers "Ask the analyst" by sending {"to": "lab/analyst", "text": "Any news?"}, then says "Asked."
    And the model replies "Noted." to "Rain in the north."
    When "alice" says "Ask the analyst" to "planner"
    Then the peer has received 1 text
    And received text 1 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message news}", "from": "planner", "to": "analyst", "text": "Any news?"}
      """
    When the peer answers "Rain in the north." on thread "A"
    Then the answer is 200 ack
    And turn 1 of thread "A" is completed
    When "alice" deletes her conversation with "planner"
    Then the answer is 204
    When the peer sends the same text again
    Then the answer is 200 ack
