Feature: The lifetime of agent conversations follows their root
  As a person whose task or conversation a role works on with a peer
  I want a late answer to a finished task still to be taken, and deleting a topic to end its
  exchanges
  So that nothing is lost while the topic lives, and nothing goes on once it is gone

  A finished task keeps its agent conversations open. Deleting a root closes them: a running turn
  ends, the texts still waiting to be sent fail with thread, the history stays, and later text in
  them is rejected with the reason thread. A sender rejected with thread closes its side, failing
  what still waits in it, so its next send from that root opens a new thread.

  Background:
    Given the box is connected to the peer "lab"

  @profile:threads @req:ADR0035-L-01
  Scenario: A finished task's agent conversation takes a late answer and runs it
    Given the model answers "Begin the survey" by sending {"to": "lab/analyst", "text": "Survey the north, please."}, then says "Survey asked."
    And the model replies "I will report it on the task." to "The survey is done."
    When "alice" creates task "T" titled "Survey the north" with members "bob"
    And "alice" starts a run of "planner" on task "T" with "Begin the survey"
    Then the peer has received 1 text
    And received text 1 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message survey}", "from": "planner", "to": "analyst", "text": "Survey the north, please."}
      """
    And the text "Survey the north, please." on thread "A" is sent
    When "bob" finishes task "T"
    Then the answer is 200
    When the peer answers "The survey is done." on thread "A"
    Then the answer is 200 ack
    And turn 1 of thread "A" is completed
    And model request 1 for "The survey is done." holds exactly:
      | role   | content                                                                                             |
      | system | You plan the work.                                                                                  |
      | system | You are planner, in agent conversation {ac A} with lab/analyst. It answers for task {task T}: Survey the north. |
      | user   | The survey is done.                                                                                 |

  @profile:threads @req:ADR0035-L-02
  Scenario: Deleting a conversation ends its agent conversation's running turn, keeps its history and closes it
    Given the model answers "Ask the analyst" by sending {"to": "lab/analyst", "text": "Any news?"}, then says "Asked."
    And the model replies "Let me think." to "Here is news." after a release
    When "alice" says "Ask the analyst" to "planner"
    Then the peer has received 1 text
    And received text 1 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message news}", "from": "planner", "to": "analyst", "text": "Any news?"}
      """
    When the peer answers "Here is news." on thread "A"
    Then the answer is 200 ack
    And turn 1 of thread "A" is running
    When "alice" deletes her conversation with "planner"
    Then the answer is 204
    And turn 1 of thread "A" is ended
    And "olga" sees thread "A" rooted "gone"
    And the text "Any news?" on thread "A" is sent
    And the text "Here is news." on thread "A" is received
    When the peer answers "More news." on thread "A"
    Then the answer is 409 "thread"
    # No sentinel: a closed agent conversation takes no later text, so nothing is ordered after a
    # turn that must not start; the kit waits instead.
    And after 3 seconds thread "A" still has 1 turn

  @profile:threads @req:ADR0035-L-02
  Scenario: Deleting a conversation fails the texts of its agent conversation still waiting to be sent
    Given the peer holds the next text
    And the model answers "Ask twice" by sending {"to": "lab/analyst", "text": "first"} and {"to": "lab/analyst", "text": "second"}, then says "Asked twice."
    When "alice" says "Ask twice" to "planner"
    Then the peer has received 1 text
    And received text 1 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message first}", "from": "planner", "to": "analyst", "text": "first"}
      """
    And the text "second" on thread "A" is queued
    When "alice" deletes her conversation with "planner"
    Then the answer is 204
    And the text "second" on thread "A" is failed with "thread"
    # The peer has "first" in hand: its 200 delivers it (spec/peer.md, The wire).
    When the peer releases the held texts
    Then the text "first" on thread "A" is sent
    # No sentinel: a closed agent conversation sends nothing more, so no later text is ordered
    # after "second"; the kit waits instead.
    And after 3 seconds the peer has still received 1 text
    And the text "second" on thread "A" is failed with "thread"

  @profile:threads @req:ADR0035-L-02
  Scenario: Deleting a task closes the agent conversations of it and of its subtasks
    Given the model answers "Begin the survey" by sending {"to": "lab/analyst", "text": "Survey the north, please."}, then says "Survey asked."
    And the model answers "Begin the river map" by sending {"to": "lab/analyst", "text": "Map the river, please."}, then says "Map asked."
    When "alice" creates task "T" titled "Survey the north" with members "bob"
    And "alice" creates subtask "S" of "T" titled "Map the river"
    And "alice" starts a run of "planner" on task "T" with "Begin the survey"
    Then the peer has received 1 text
    And received text 1 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message survey}", "from": "planner", "to": "analyst", "text": "Survey the north, please."}
      """
    When "alice" starts a run of "planner" on task "S" with "Begin the river map"
    Then the peer has received 2 texts
    And received text 2 is exactly:
      """
      {"v": 1, "thread": "{thread B}", "message": "{message river}", "from": "planner", "to": "analyst", "text": "Map the river, please."}
      """
    And the text "Map the river, please." on thread "B" is sent
    When "alice" deletes task "T"
    Then the answer is 204
    When the peer answers "Surveyed." on thread "A"
    Then the answer is 409 "thread"
    When the peer answers "Mapped." on thread "B"
    Then the answer is 409 "thread"
    And "olga" sees thread "B" rooted "gone"

  @profile:threads @req:ADR0035-L-03
  Scenario: A sender rejected with thread closes its side, and its next send from that root opens a new thread
    Given the model answers "Ask the analyst" by sending {"to": "lab/analyst", "text": "Any news?"}, then says "Asked."
    And the model answers "Ask again" by sending {"to": "lab/analyst", "text": "Any more news?"}, then says "Asked again."
    And the model answers "Ask once more" by sending {"to": "lab/analyst", "text": "Really, any news?"}, then says "Asked once more."
    When "alice" says "Ask the analyst" to "planner"
    Then the peer has received 1 text
    And received text 1 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message news}", "from": "planner", "to": "analyst", "text": "Any news?"}
      """
    And the text "Any news?" on thread "A" is sent
    Given the peer answers the next 1 text with 409 "thread"
    When "alice" says "Ask again" to "planner"
    Then the peer has received 2 texts
    And received text 2 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message more}", "from": "planner", "to": "analyst", "text": "Any more news?"}
      """
    And the text "Any more news?" on thread "A" is failed with "thread"
    When "alice" says "Ask once more" to "planner"
    Then the peer has received 3 texts
    And received text 3 is exactly:
      """
      {"v": 1, "thread": "{thread B}", "message": "{message really}", "from": "planner", "to": "analyst", "text": "Really, any news?"}
      """
    And threads "A" and "B" are different

  @profile:threads @req:ADR0035-L-03
  Scenario: The texts waiting behind a text rejected with thread fail with thread and are never sent
    Given the peer holds the next text, then answers it with 409 "thread"
    And the model answers "Ask twice" by sending {"to": "lab/analyst", "text": "first"} and {"to": "lab/analyst", "text": "second"}, then says "Asked twice."
    And the model answers "Ask once more" by sending {"to": "lab/analyst", "text": "Really, any news?"}, then says "Asked once more."
    When "alice" says "Ask twice" to "planner"
    Then the peer has received 1 text
    And received text 1 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message first}", "from": "planner", "to": "analyst", "text": "first"}
      """
    And the text "second" on thread "A" is queued
    When the peer releases the held texts
    Then the text "first" on thread "A" is failed with "thread"
    And the text "second" on thread "A" is failed with "thread"
    When "alice" says "Ask once more" to "planner"
    Then the peer has received 2 texts
    And received text 2 is exactly:
      """
      {"v": 1, "thread": "{thread B}", "message": "{message really}", "from": "planner", "to": "analyst", "text": "Really, any news?"}
      """
    And threads "A" and "B" are different
    # No sentinel: nothing more is sent in the closed agent conversation, so no later text is
    # ordered after "second"; the kit waits instead.
    And after 3 seconds the peer has still received 2 texts
