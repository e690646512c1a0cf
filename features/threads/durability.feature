Feature: Texts between boxes survive a crash
  As a person whose request crosses to a peer box
  I want an acknowledged text never to be lost or taken twice, and a text stored to be sent to go
  out after a crash
  So that a crash of either box neither drops nor repeats an exchange

  A text the box acknowledged survives a SIGKILL at any point after the answer and is taken by
  exactly one turn. A text stored to be sent is sent after a crash, under its one message id.

  Background:
    Given the box is connected to the peer "lab"

  @profile:threads @req:ADR0035-D-01 @crash
  Scenario: An acknowledged text survives a SIGKILL and is taken by exactly one turn
    Given the model replies "Half done." to "Keep this safe" after a release
    And the model replies "Kept." to "Keep this safe"
    And the model replies "Nothing else." to "Anything else?"
    When the peer sends "Keep this safe" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    And the model has been asked 1 time
    When the system is killed and restarted
    Then the text "Keep this safe" on thread "K" was taken by exactly one turn, which completed
    And the text "Keep this safe" on thread "K" is received
    # A later text is the sentinel: an agent conversation has one turn at a time, and the next turn
    # takes every text waiting then (spec/peer.md, Receiving). Once the turn of "Anything else?"
    # has completed, every other turn that took "Keep this safe", and each model request of it,
    # came before; a "Keep this safe" left waiting would have been taken with "Anything else?".
    When the peer sends "Anything else?" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    And the text "Anything else?" on thread "K" was taken by exactly one turn, which completed
    And the model has been asked 2 times for "Keep this safe"
    And the text "Keep this safe" on thread "K" was taken by exactly one turn, which completed

  @profile:threads @req:ADR0035-D-01 @req:ADR0035-W-02 @crash
  Scenario: A text sent again after the receiver restarted gets the same answer and adds nothing
    Given the model replies "Kept." to "Keep this safe"
    And the model replies "Nothing else." to "Anything else?"
    When the peer sends "Keep this safe" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    And turn 1 of thread "K" is completed
    When the system is killed and restarted
    And the peer sends the same text again
    Then the answer is 200 ack
    # A later text is the sentinel: an agent conversation has one turn at a time, and the next turn
    # takes every text waiting then (spec/peer.md, Receiving), so a turn for the repeat would come
    # before the turn of "Anything else?", or the repeat would be taken with it.
    When the peer sends "Anything else?" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    And turn 2 of thread "K" is completed
    And thread "K" has exactly 2 turns, the last of which took only "Anything else?"
    And "dana" sees the agent conversation of thread "K" as:
      """
      {"id": "{ac K}", "connection": "lab", "thread": "{thread K}", "role": "planner", "peerRole": "analyst",
       "startedBy": "peer", "root": {"kind": "agent", "id": "{ac K}"}, "state": "open",
       "texts": [{"dir": "in", "message": "{message Keep this safe}", "text": "Keep this safe", "state": "received"},
                 {"dir": "in", "message": "{message Anything else?}", "text": "Anything else?", "state": "received"}],
       "turns": [{"turn": 1, "status": "completed", "texts": ["{message Keep this safe}"], "output": "Kept."},
                 {"turn": 2, "status": "completed", "texts": ["{message Anything else?}"], "output": "Nothing else."}]}
      """

  @profile:threads @req:ADR0035-D-01 @crash
  Scenario: A text stored to be sent is sent after a crash under its one message id
    Given the peer holds the next text
    And the model answers "Ask the analyst" by sending {"to": "lab/analyst", "text": "Any news?"}, then says "Asked."
    And the model answers "Ask again" by sending {"to": "lab/analyst", "text": "Anything more?"}, then says "Asked again."
    When "alice" says "Ask the analyst" to "planner"
    Then the peer has received 1 text
    And received text 1 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message news}", "from": "planner", "to": "analyst", "text": "Any news?"}
      """
    When the system is killed and restarted
    Then the peer has received 2 texts
    And received text 2 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message news}", "from": "planner", "to": "analyst", "text": "Any news?"}
      """
    And the text "Any news?" on thread "A" is sent
    # A later text of the same agent conversation is the sentinel: it is sent only after every
    # earlier one was delivered or failed, and a text answered 200 is delivered (spec/peer.md, The
    # wire). Had the sender tried "Any news?" once more, the peer would have had it first.
    When "alice" says "Ask again" to "planner"
    Then the peer has received exactly 3 texts once "Anything more?" has arrived
    And received text 3 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message more}", "from": "planner", "to": "analyst", "text": "Anything more?"}
      """
    And the peer found every text well-formed

  @profile:threads @req:ADR0035-D-01 @crash
  Scenario: A text delivered before a crash of the sender is not sent again after it
    Given the model answers "Ask the analyst" by sending {"to": "lab/analyst", "text": "Any news?"}, then says "Asked."
    And the model answers "Ask again" by sending {"to": "lab/analyst", "text": "Anything more?"}, then says "Asked again."
    When "alice" says "Ask the analyst" to "planner"
    Then the peer has received 1 text
    And received text 1 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message news}", "from": "planner", "to": "analyst", "text": "Any news?"}
      """
    And the text "Any news?" on thread "A" is sent
    When the system is killed and restarted
    # A later text of the same agent conversation is the sentinel: it is sent only after every
    # earlier one was delivered or failed (spec/peer.md, The wire), and a text recorded sent is never
    # sent again (spec/peer.md, Durability). Had "Any news?" gone out again, the peer would have had
    # it before "Anything more?".
    And "alice" says "Ask again" to "planner"
    Then the peer has received exactly 2 texts once "Anything more?" has arrived
    And received text 2 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message more}", "from": "planner", "to": "analyst", "text": "Anything more?"}
      """

  @profile:threads @req:ADR0035-D-02 @crash
  Scenario: A person's message sent again under its key after a crash runs once, and the peer gets its text once
    Given the model answers "Ask the analyst" by sending {"to": "lab/analyst", "text": "Any news?"}, then says "Asked."
    And the model answers "Ask again" by sending {"to": "lab/analyst", "text": "Anything more?"}, then says "Asked again."
    When "alice" says "Ask the analyst" to "planner" under key "ask-1"
    Then the answer is exactly 202 {"conversation": "{conv alice planner}", "turn": 1}
    And the peer has received 1 text
    And received text 1 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message news}", "from": "planner", "to": "analyst", "text": "Any news?"}
      """
    And the text "Any news?" on thread "A" is sent
    When the system is killed and restarted
    And "alice" says "Ask the analyst" to "planner" under key "ask-1"
    Then the answer is exactly 202 {"conversation": "{conv alice planner}", "turn": 1}
    # A later message is the sentinel: its turn is the one after every turn before it, and its
    # text goes out only after every earlier text of the agent conversation (spec/peer.md, The
    # wire). A second turn for the repeat would have made this one turn 3, and its text would have
    # reached the peer first.
    When "alice" says "Ask again" to "planner" under key "ask-2"
    Then the answer is exactly 202 {"conversation": "{conv alice planner}", "turn": 2}
    And the peer has received exactly 2 texts once "Anything more?" has arrived
    And received text 1 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message news}", "from": "planner", "to": "analyst", "text": "Any news?"}
      """
    And received text 2 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message more}", "from": "planner", "to": "analyst", "text": "Anything more?"}
      """

  @profile:threads @req:ADR0035-D-02 @crash
  Scenario: A task and a task run made again under their keys after a crash are the first ones
    Given the model replies "Surveyed." to "Begin the survey"
    When "alice" creates task "T" titled "Survey the north" under key "task-1"
    Then the answer is exactly 201 {"id": "{task T}", "title": "Survey the north", "owner": {"tenant": "acme", "actor": "alice"}, "members": [{"tenant": "acme", "actor": "alice"}], "state": "open"}
    When "alice" starts a run of "planner" on task "T" with "Begin the survey" under key "run-1"
    Then the answer is exactly 202 {"run": "{run T}"}
    When the system is killed and restarted
    And "alice" creates task "T" titled "Survey the north" under key "task-1"
    Then the answer is exactly 201 {"id": "{task T}", "title": "Survey the north", "owner": {"tenant": "acme", "actor": "alice"}, "members": [{"tenant": "acme", "actor": "alice"}], "state": "open"}
    When "alice" starts a run of "planner" on task "T" with "Begin the survey" under key "run-1"
    Then the answer is exactly 202 {"run": "{run T}"}
    When "alice" creates task "U" titled "Survey the north" under key "task-2"
    Then the answer is exactly 201 {"id": "{task U}", "title": "Survey the north", "owner": {"tenant": "acme", "actor": "alice"}, "members": [{"tenant": "acme", "actor": "alice"}], "state": "open"}
    And tasks "T" and "U" are different

  @profile:threads @req:ADR0035-W-06 @configures @crash
  Scenario: After a restart only the texts no turn has taken count against the connection's bound
    Given the connection "lab" holds at most 2 waiting texts
    And the model replies "Got one." to "one"
    And the model replies "Got two." to "two"
    And the model replies "Got three." to "three"
    When the peer sends "one" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    And turn 1 of thread "K" is completed
    When the peer sends "two" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    And turn 2 of thread "K" is completed
    When the system is killed and restarted
    And the peer sends "three" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    And turn 3 of thread "K" is completed

  @profile:threads @req:ADR0035-P-03 @configures @crash
  Scenario: After a restart the texts delivered before it no longer count against the bound
    Given the connection "lab" holds at most 2 waiting texts
    And the model answers "Send the notes" by sending {"to": "lab/analyst", "text": "note one"} and {"to": "lab/analyst", "text": "note two"}, then says "Sent them."
    And the model answers "Send more" by sending {"to": "lab/analyst", "text": "note three"} and {"to": "lab/analyst", "text": "note four"}, then says "Sent them too."
    When "alice" says "Send the notes" to "planner"
    Then the peer.send results for "Send the notes" are 2 sent and 0 "queue-full"
    And the peer has received 2 texts
    And received text 1 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message one}", "from": "planner", "to": "analyst", "text": "note one"}
      """
    And the text "note two" on thread "A" is sent
    When the system is killed and restarted
    And "alice" says "Send more" to "planner"
    Then the peer.send results for "Send more" are 2 sent and 0 "queue-full"
    And the peer has received exactly 4 texts once "note three" and "note four" have arrived
