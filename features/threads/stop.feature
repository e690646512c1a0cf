Feature: Stopping the agent of an agent conversation
  As a person who reads an agent conversation
  I want to stop its agent when it works too long on one request
  So that the request is dropped rather than tried again, and the exchange can still go on

  A stop cancels the running turn, which ends stopped; the texts it took count as handled and are
  never given to a turn again, and nothing restarts it. The next text that arrives starts a turn
  that is told it was stopped. With no running turn a stop changes nothing.

  Background:
    Given the box is connected to the peer "lab"

  @profile:threads @req:ADR0035-T-01
  Scenario: A stopped turn's text is handled, and the next text continues the conversation, told it was stopped
    Given the model answers "Count every grain of sand" by sending {"to": "lab/analyst", "text": "Still counting."} after a release, then says "Counted."
    And the model answers "Where are you?" by sending {"to": "lab/analyst", "text": "Stopped, as asked."}, then says "Told the analyst."
    When the peer sends "Count every grain of sand" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    And turn 1 of thread "K" is running
    # The turn's model call is in flight (held) before the stop: running alone does not say so.
    And the model has been asked 1 time
    When the peer sends "Also count the stars" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    When "dana" stops the agent conversation of thread "K"
    Then the answer is stopped true
    And turn 1 of thread "K" is stopped
    # The stopped turn's execution is cancelled: released now, the model's answer to it (a send)
    # reaches no one.
    When the model is released
    # The next text is the sentinel: an agent conversation has one turn at a time, and the next turn
    # takes every text waiting then (spec/peer.md, Receiving), so a turn that the stop started, or
    # that restarted the stopped one, would come before the turn of "Where are you?", and a text
    # given again would be taken with it: both would show in its request and in the turns below.
    # The stopped turn's send, had its execution gone on, would have been asked for at the release,
    # before "Where are you?" was even sent, and been the peer's first text.
    When the peer sends "Where are you?" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    And turn 2 of thread "K" is completed
    And the peer has received 1 text
    And received text 1 is exactly:
      """
      {"v": 1, "thread": "{thread K}", "message": "{message stopped}", "from": "planner", "to": "analyst", "text": "Stopped, as asked."}
      """
    And the model has been asked 1 time for "Count every grain of sand"
    And the model has been asked 3 times in all
    And model request 1 for "Where are you?" holds exactly:
      | role   | content                                                                               |
      | system | You plan the work.                                                                    |
      | system | You are planner, in agent conversation {ac K} with lab/analyst. It answers for itself. |
      | user   | Count every grain of sand                                                             |
      | system | A person stopped your last turn.                                                      |
      | user   | Also count the stars                                                                  |
      | user   | Where are you?                                                                        |
    And "dana" sees the agent conversation of thread "K" as:
      """
      {"id": "{ac K}", "connection": "lab", "thread": "{thread K}", "role": "planner", "peerRole": "analyst",
       "startedBy": "peer", "root": {"kind": "agent", "id": "{ac K}"}, "state": "open",
       "texts": [{"dir": "in", "message": "{message Count every grain of sand}", "text": "Count every grain of sand", "state": "received"},
                 {"dir": "in", "message": "{message Also count the stars}", "text": "Also count the stars", "state": "received"},
                 {"dir": "in", "message": "{message Where are you?}", "text": "Where are you?", "state": "received"},
                 {"dir": "out", "message": "{message stopped}", "text": "Stopped, as asked.", "state": "sent"}],
       "turns": [{"turn": 1, "status": "stopped", "texts": ["{message Count every grain of sand}"]},
                 {"turn": 2, "status": "completed", "texts": ["{message Also count the stars}", "{message Where are you?}"], "output": "Told the analyst."}]}
      """

  # The same exchange with a SIGKILL right after the stop: a stop is durable once answered
  # (spec/peer.md, Stop), so the restart neither runs the stopped turn again nor gives its text to
  # another turn, and the next turn is still told it was stopped. The model call of the stopped
  # turn is released only after the restart, when no one waits for it.
  @profile:threads @req:ADR0035-T-01 @crash
  Scenario: A stop holds across a restart: the stopped turn is not run again and its text is not given again
    Given the model answers "Count every grain of sand" by sending {"to": "lab/analyst", "text": "Still counting."} after a release, then says "Counted."
    And the model answers "Where are you?" by sending {"to": "lab/analyst", "text": "Stopped, as asked."}, then says "Told the analyst."
    When the peer sends "Count every grain of sand" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    And turn 1 of thread "K" is running
    And the model has been asked 1 time
    When the peer sends "Also count the stars" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    When "dana" stops the agent conversation of thread "K"
    Then the answer is stopped true
    And turn 1 of thread "K" is stopped
    When the system is killed and restarted
    And the model is released
    # The sentinel, as above: a turn the restart started, or a text it gave again, would show in
    # the turns and in the request of "Where are you?".
    When the peer sends "Where are you?" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    And turn 2 of thread "K" is completed
    And the peer has received 1 text
    And received text 1 is exactly:
      """
      {"v": 1, "thread": "{thread K}", "message": "{message stopped}", "from": "planner", "to": "analyst", "text": "Stopped, as asked."}
      """
    And the model has been asked 1 time for "Count every grain of sand"
    And the model has been asked 3 times in all
    And model request 1 for "Where are you?" holds exactly:
      | role   | content                                                                               |
      | system | You plan the work.                                                                    |
      | system | You are planner, in agent conversation {ac K} with lab/analyst. It answers for itself. |
      | user   | Count every grain of sand                                                             |
      | system | A person stopped your last turn.                                                      |
      | user   | Also count the stars                                                                  |
      | user   | Where are you?                                                                        |
    And "dana" sees the agent conversation of thread "K" as:
      """
      {"id": "{ac K}", "connection": "lab", "thread": "{thread K}", "role": "planner", "peerRole": "analyst",
       "startedBy": "peer", "root": {"kind": "agent", "id": "{ac K}"}, "state": "open",
       "texts": [{"dir": "in", "message": "{message Count every grain of sand}", "text": "Count every grain of sand", "state": "received"},
                 {"dir": "in", "message": "{message Also count the stars}", "text": "Also count the stars", "state": "received"},
                 {"dir": "in", "message": "{message Where are you?}", "text": "Where are you?", "state": "received"},
                 {"dir": "out", "message": "{message stopped}", "text": "Stopped, as asked.", "state": "sent"}],
       "turns": [{"turn": 1, "status": "stopped", "texts": ["{message Count every grain of sand}"]},
                 {"turn": 2, "status": "completed", "texts": ["{message Also count the stars}", "{message Where are you?}"], "output": "Told the analyst."}]}
      """

  @profile:threads @req:ADR0035-T-01
  Scenario: A person who cannot read it gets the uniform 404; with no running turn a stop changes nothing
    Given the model replies "Hello, analyst." to "Hello planner"
    And the model replies "You are welcome." to "Thanks"
    When the peer sends "Hello planner" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    And turn 1 of thread "K" is completed
    When "alice" stops the agent conversation of thread "K"
    Then the answer is the uniform 404
    When "olga" stops the agent conversation of thread "K"
    Then the answer is stopped false
    And turn 1 of thread "K" is completed
    # The next text is the sentinel: one turn at a time, the next taking every text waiting then
    # (spec/peer.md, Receiving), so a turn the stop started would come before the turn of "Thanks",
    # and a stop that counted would make that turn told so (spec/peer.md, Receiving, item 4).
    When the peer sends "Thanks" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    And turn 2 of thread "K" is completed
    And thread "K" has exactly 2 turns, the last of which took only "Thanks"
    And model request 1 for "Thanks" holds exactly:
      | role      | content                                                                               |
      | system    | You plan the work.                                                                    |
      | system    | You are planner, in agent conversation {ac K} with lab/analyst. It answers for itself. |
      | user      | Hello planner                                                                         |
      | assistant | Hello, analyst.                                                                       |
      | user      | Thanks                                                                                |
