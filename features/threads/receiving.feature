Feature: Receiving texts from the peer
  As a role of the box that a peer role writes to
  I want each thread the peer writes on to be one agent conversation with its own history
  So that I answer each exchange knowing what was said in it, and only in it

  A text on a thread the box does not know starts an agent conversation of the addressed role,
  started by the peer and rooted in itself; a text on a known thread continues it, and its turn is
  given the conversation's history. A text whose roles are not the thread's pair is rejected.
  Texts that arrive while a turn runs wait for the next turn, which takes them all, in order.

  Background:
    Given the box is connected to the peer "lab"

  @profile:threads @req:ADR0035-C-01
  Scenario: An unknown thread starts a conversation rooted in itself; a known one continues it with its history
    Given the model replies "Hello, analyst." to "Hello planner"
    And the model replies "The plan is ready." to "Is the plan ready?"
    When the peer sends "Hello planner" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    And turn 1 of thread "K" is completed
    And model request 1 for "Hello planner" holds exactly:
      | role   | content                                                                               |
      | system | You plan the work.                                                                    |
      | system | You are planner, in agent conversation {ac K} with lab/analyst. It answers for itself. |
      | user   | Hello planner                                                                         |
    When the peer sends "Is the plan ready?" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    And turn 2 of thread "K" is completed
    And model request 1 for "Is the plan ready?" holds exactly:
      | role      | content                                                                               |
      | system    | You plan the work.                                                                    |
      | system    | You are planner, in agent conversation {ac K} with lab/analyst. It answers for itself. |
      | user      | Hello planner                                                                         |
      | assistant | Hello, analyst.                                                                       |
      | user      | Is the plan ready?                                                                    |
    And "olga" sees the agent conversation of thread "K" as:
      """
      {"id": "{ac K}", "connection": "lab", "thread": "{thread K}", "role": "planner", "peerRole": "analyst",
       "startedBy": "peer", "root": {"kind": "agent", "id": "{ac K}"}, "state": "open",
       "texts": [{"dir": "in", "message": "{message Hello planner}", "text": "Hello planner", "state": "received"},
                 {"dir": "in", "message": "{message Is the plan ready?}", "text": "Is the plan ready?", "state": "received"}],
       "turns": [{"turn": 1, "status": "completed", "texts": ["{message Hello planner}"], "output": "Hello, analyst."},
                 {"turn": 2, "status": "completed", "texts": ["{message Is the plan ready?}"], "output": "The plan is ready."}]}
      """

  @profile:threads @req:ADR0035-C-01
  Scenario: A known thread with other roles is rejected as roles, and nothing is added
    Given the model replies "Hello, analyst." to "Hello planner"
    And the model replies "Still here." to "Are you still there?"
    When the peer sends "Hello planner" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    And turn 1 of thread "K" is completed
    When the peer sends "I am someone else" from "critic" to "planner" on thread "K"
    Then the answer is 409 "roles"
    When the peer sends "For the scout" from "analyst" to "scout" on thread "K"
    Then the answer is 409 "roles"
    # A later text of the thread is the sentinel: an agent conversation has one turn at a time, and
    # the next turn takes every text waiting then (spec/peer.md, Receiving), so a turn that took a
    # rejected text would come before the turn of "Are you still there?", or take it with it.
    When the peer sends "Are you still there?" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    And turn 2 of thread "K" is completed
    And "dana" sees the agent conversation of thread "K" as:
      """
      {"id": "{ac K}", "connection": "lab", "thread": "{thread K}", "role": "planner", "peerRole": "analyst",
       "startedBy": "peer", "root": {"kind": "agent", "id": "{ac K}"}, "state": "open",
       "texts": [{"dir": "in", "message": "{message Hello planner}", "text": "Hello planner", "state": "received"},
                 {"dir": "in", "message": "{message Are you still there?}", "text": "Are you still there?", "state": "received"}],
       "turns": [{"turn": 1, "status": "completed", "texts": ["{message Hello planner}"], "output": "Hello, analyst."},
                 {"turn": 2, "status": "completed", "texts": ["{message Are you still there?}"], "output": "Still here."}]}
      """

  @profile:threads @req:ADR0035-C-02
  Scenario: Texts that arrive while a turn runs are taken together, in order, by the next turn
    Given the model replies "Working on one." to "one" after a release
    And the model replies "Took two and three." to "three"
    And the model replies "Took four." to "four"
    When the peer sends "one" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    And turn 1 of thread "K" is running
    When the peer sends "two" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    When the peer sends "three" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    When the model is released
    Then turn 2 of thread "K" is completed
    And model request 1 for "three" holds exactly:
      | role      | content                                                                               |
      | system    | You plan the work.                                                                    |
      | system    | You are planner, in agent conversation {ac K} with lab/analyst. It answers for itself. |
      | user      | one                                                                                   |
      | assistant | Working on one.                                                                       |
      | user      | two                                                                                   |
      | user      | three                                                                                 |
    And "dana" sees the agent conversation of thread "K" as:
      """
      {"id": "{ac K}", "connection": "lab", "thread": "{thread K}", "role": "planner", "peerRole": "analyst",
       "startedBy": "peer", "root": {"kind": "agent", "id": "{ac K}"}, "state": "open",
       "texts": [{"dir": "in", "message": "{message one}", "text": "one", "state": "received"},
                 {"dir": "in", "message": "{message two}", "text": "two", "state": "received"},
                 {"dir": "in", "message": "{message three}", "text": "three", "state": "received"}],
       "turns": [{"turn": 1, "status": "completed", "texts": ["{message one}"], "output": "Working on one."},
                 {"turn": 2, "status": "completed", "texts": ["{message two}", "{message three}"], "output": "Took two and three."}]}
      """
    # A later text is the sentinel: one turn at a time, the next taking every text waiting then
    # (spec/peer.md, Receiving), so a third turn for "two" or "three" would come before the turn of
    # "four", or take it with them.
    When the peer sends "four" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    And turn 3 of thread "K" is completed
    And thread "K" has exactly 3 turns, the last of which took only "four"
