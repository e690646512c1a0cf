Feature: The bounds of an agent conversation
  As the operator of a box that talks with a peer box
  I want a long agent conversation to send the model a bounded request, to stop growing once it
  has stored its budget, and the peer's texts to be held to a rate
  So that no peer can make my box's requests, storage or work grow without end

  A turn's request shows the newest 8 earlier turns and says how many it leaves out. Each agent
  conversation stores at most its connection's budget of text bytes, both ways; a text past it is
  refused with budget on the wire and by peer.send. The peer presents at most its connection's
  rate of texts a minute; a text past it is refused with rate, and nothing is stored for it.

  Background:
    Given the box is connected to the peer "lab"

  @profile:threads @req:ADR0035-Q-01
  Scenario: A long agent conversation sends the newest 8 earlier turns and says how many it left out
    Given the peer sends 10 texts from "analyst" to "planner" on thread "K", each answered by a turn of its own
    And the model replies "answer 11" to "text 11"
    When the peer sends "text 11" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    And turn 11 of thread "K" is completed
    And model request 1 for "text 11" holds exactly:
      | role      | content                                                                                |
      | system    | You plan the work.                                                                     |
      | system    | You are planner, in agent conversation {ac K} with lab/analyst. It answers for itself. |
      | system    | Turns 1 to 2 of this conversation are left out.                                        |
      | user      | text 3                                                                                 |
      | assistant | answer 3                                                                               |
      | user      | text 4                                                                                 |
      | assistant | answer 4                                                                               |
      | user      | text 5                                                                                 |
      | assistant | answer 5                                                                               |
      | user      | text 6                                                                                 |
      | assistant | answer 6                                                                               |
      | user      | text 7                                                                                 |
      | assistant | answer 7                                                                               |
      | user      | text 8                                                                                 |
      | assistant | answer 8                                                                               |
      | user      | text 9                                                                                 |
      | assistant | answer 9                                                                               |
      | user      | text 10                                                                                |
      | assistant | answer 10                                                                              |
      | user      | text 11                                                                                |

  @profile:threads @req:ADR0035-Q-01
  Scenario: With 8 earlier turns nothing is left out
    Given the peer sends 8 texts from "analyst" to "planner" on thread "K", each answered by a turn of its own
    And the model replies "answer 9" to "text 9"
    When the peer sends "text 9" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    And turn 9 of thread "K" is completed
    And model request 1 for "text 9" holds exactly:
      | role      | content                                                                                |
      | system    | You plan the work.                                                                     |
      | system    | You are planner, in agent conversation {ac K} with lab/analyst. It answers for itself. |
      | user      | text 1                                                                                 |
      | assistant | answer 1                                                                               |
      | user      | text 2                                                                                 |
      | assistant | answer 2                                                                               |
      | user      | text 3                                                                                 |
      | assistant | answer 3                                                                               |
      | user      | text 4                                                                                 |
      | assistant | answer 4                                                                               |
      | user      | text 5                                                                                 |
      | assistant | answer 5                                                                               |
      | user      | text 6                                                                                 |
      | assistant | answer 6                                                                               |
      | user      | text 7                                                                                 |
      | assistant | answer 7                                                                               |
      | user      | text 8                                                                                 |
      | assistant | answer 8                                                                               |
      | user      | text 9                                                                                 |

  @profile:threads @req:ADR0035-Q-02 @configures
  Scenario: A text that would take the agent conversation past its budget is refused as budget, and nothing is added
    Given the connection "lab" stores at most 20 bytes of text per agent conversation
    And the model replies "Got ten." to "0123456789"
    And the model replies "Got ten more." to "abcdefghij"
    When the peer sends "0123456789" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    And turn 1 of thread "K" is completed
    When the peer sends "abcdefghijk" from "analyst" to "planner" on thread "K"
    Then the answer is 409 "budget"
    When the peer sends "abcdefghij" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    And turn 2 of thread "K" is completed
    When the peer sends "z" from "analyst" to "planner" on thread "K"
    Then the answer is 409 "budget"
    And "olga" sees the agent conversation of thread "K" as:
      """
      {"id": "{ac K}", "connection": "lab", "thread": "{thread K}", "role": "planner", "peerRole": "analyst",
       "startedBy": "peer", "root": {"kind": "agent", "id": "{ac K}"}, "state": "open",
       "texts": [{"dir": "in", "message": "{message 0123456789}", "text": "0123456789", "state": "received"},
                 {"dir": "in", "message": "{message abcdefghij}", "text": "abcdefghij", "state": "received"}],
       "turns": [{"turn": 1, "status": "completed", "texts": ["{message 0123456789}"], "output": "Got ten."},
                 {"turn": 2, "status": "completed", "texts": ["{message abcdefghij}"], "output": "Got ten more."}]}
      """

  @profile:threads @req:ADR0035-Q-02 @configures
  Scenario: peer.send answers budget for a text past the agent conversation's budget, and queues nothing
    Given the connection "lab" stores at most 20 bytes of text per agent conversation
    And the model answers "Ask twice" by sending {"to": "lab/analyst", "text": "0123456789abcde"} and {"to": "lab/analyst", "text": "0123456789"}, then says "Asked once."
    When "alice" says "Ask twice" to "planner"
    Then the peer.send results for "Ask twice" are 1 sent and 1 "budget"
    And the peer has received 1 text
    And received text 1 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message 0123456789abcde}", "from": "planner", "to": "analyst", "text": "0123456789abcde"}
      """
    And "alice" sees the agent conversation of thread "A" as:
      """
      {"id": "{ac A}", "connection": "lab", "thread": "{thread A}", "role": "planner", "peerRole": "analyst",
       "startedBy": "local", "root": {"kind": "conversation", "id": "{conv alice planner}"}, "state": "open",
       "texts": [{"dir": "out", "message": "{message 0123456789abcde}", "text": "0123456789abcde", "state": "sent"}],
       "turns": []}
      """

  @profile:threads @req:ADR0035-Q-03 @configures
  Scenario: Past its rate the peer is refused as rate, and nothing is stored
    Given the connection "lab" takes at most 3 texts per minute from the peer
    When the peer sends "one" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    When the peer sends "two" from "analyst" to "planner" on thread "L"
    Then the answer is 200 ack
    When the peer sends "three" from "analyst" to "planner" on thread "M"
    Then the answer is 200 ack
    When the peer sends "four" from "analyst" to "planner" on thread "N"
    Then the answer is 429 "rate"
    And nothing is stored on thread "N"

  @profile:threads @req:ADR0035-Q-02 @configures
  Scenario: peer.send takes a text that fills the agent conversation's budget exactly
    Given the connection "lab" stores at most 20 bytes of text per agent conversation
    And the model answers "Ask twice" by sending {"to": "lab/analyst", "text": "0123456789abcde"} and {"to": "lab/analyst", "text": "vwxyz"}, then says "Asked twice."
    When "alice" says "Ask twice" to "planner"
    Then the peer.send results for "Ask twice" are 2 sent and 0 "budget"
    And the peer has received 2 texts
    And received text 1 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message 0123456789abcde}", "from": "planner", "to": "analyst", "text": "0123456789abcde"}
      """
    And received text 2 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message vwxyz}", "from": "planner", "to": "analyst", "text": "vwxyz"}
      """

  @profile:threads @req:ADR0035-Q-03 @configures
  Scenario: A rate of 1 takes one text at once, and refuses the next as rate
    Given the connection "lab" takes at most 1 texts per minute from the peer
    When the peer sends "one" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    When the peer sends "two" from "analyst" to "planner" on thread "L"
    Then the answer is 429 "rate"
    And nothing is stored on thread "L"

  @profile:threads @req:ADR0035-Q-01 @fresh-system
  Scenario: A person's conversation with 8 earlier turns sends them all and leaves nothing out
    Given the model replies "answer 1" to "text 1"
    And the model replies "answer 2" to "text 2"
    And the model replies "answer 3" to "text 3"
    And the model replies "answer 4" to "text 4"
    And the model replies "answer 5" to "text 5"
    And the model replies "answer 6" to "text 6"
    And the model replies "answer 7" to "text 7"
    And the model replies "answer 8" to "text 8"
    And the model replies "answer 9" to "text 9"
    When "alice" says "text 1" to "planner"
    And "alice" says "text 2" to "planner"
    And "alice" says "text 3" to "planner"
    And "alice" says "text 4" to "planner"
    And "alice" says "text 5" to "planner"
    And "alice" says "text 6" to "planner"
    And "alice" says "text 7" to "planner"
    And "alice" says "text 8" to "planner"
    And "alice" says "text 9" to "planner"
    Then model request 1 for "text 9" holds exactly:
      | role      | content            |
      | system    | You plan the work. |
      | user      | text 1             |
      | assistant | answer 1           |
      | user      | text 2             |
      | assistant | answer 2           |
      | user      | text 3             |
      | assistant | answer 3           |
      | user      | text 4             |
      | assistant | answer 4           |
      | user      | text 5             |
      | assistant | answer 5           |
      | user      | text 6             |
      | assistant | answer 6           |
      | user      | text 7             |
      | assistant | answer 7           |
      | user      | text 8             |
      | assistant | answer 8           |
      | user      | text 9             |
