Feature: Sending to a peer role, in the agent conversation of the run's topic
  As a person whose request a role of the box passes on to a role of a peer box
  I want the box to keep one agent conversation per topic and pair of roles
  So that the answer comes back to the run that knows who is waiting, and nobody else's text is
  ever mixed into mine

  A run sends with the built-in tool peer.send, naming only the recipient. The box takes the topic
  from what the run works on: the person's conversation, the task, or the root of the agent
  conversation it runs in. The first send of a topic to a peer role opens an agent conversation
  with a new random thread; later ones continue it. A role token with no run has no topic.

  Background:
    Given the box is connected to the peer "lab"

  @profile:threads @req:ADR0035-S-01
  Scenario: A send from a person's conversation opens an agent conversation; the next one continues it; another recipient gets another
    Given the model answers "Ask the analyst about the north" by sending {"to": "lab/analyst", "text": "What is in the north?"}, then says "I asked."
    And the model answers "Ask again" by sending {"to": "lab/analyst", "text": "And further north?"}, then says "Asked again."
    And the model answers "Ask the critic" by sending {"to": "lab/critic", "text": "Is the north safe?"}, then says "Asked the critic."
    When "alice" says "Ask the analyst about the north" to "planner"
    Then the peer has received 1 text
    And received text 1 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message north}", "from": "planner", "to": "analyst", "text": "What is in the north?"}
      """
    And model request 2 for "Ask the analyst about the north" holds exactly:
      | role      | content                                                                    |
      | system    | You plan the work.                                                         |
      | user      | Ask the analyst about the north                                            |
      | assistant | [calls peer.send {"text":"What is in the north?","to":"lab/analyst"}]      |
      | tool      | {"sent": true, "agentConversation": "{ac A}"} [for peer.send]              |
    And "alice" sees the agent conversation of thread "A" as:
      """
      {"id": "{ac A}", "connection": "lab", "thread": "{thread A}", "role": "planner", "peerRole": "analyst",
       "startedBy": "local", "root": {"kind": "conversation", "id": "{conv alice planner}"}, "state": "open",
       "texts": [{"dir": "out", "message": "{message north}", "text": "What is in the north?", "state": "sent"}],
       "turns": []}
      """
    When "alice" says "Ask again" to "planner"
    Then the peer has received 2 texts
    And received text 2 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message further}", "from": "planner", "to": "analyst", "text": "And further north?"}
      """
    When "alice" says "Ask the critic" to "planner"
    Then the peer has received 3 texts
    And received text 3 is exactly:
      """
      {"v": 1, "thread": "{thread C}", "message": "{message critic}", "from": "planner", "to": "critic", "text": "Is the north safe?"}
      """
    And threads "A" and "C" are different

  @profile:threads @req:ADR0035-S-02 @fresh-system
  Scenario: The reply comes back in the same agent conversation and its run is told whom it answers for
    Given the model answers "Ask the analyst about the north" by sending {"to": "lab/analyst", "text": "What is in the north?"}, then says "I asked."
    And the model replies "Noted, I will tell alice." to "It is cold in the north."
    When "alice" says "Ask the analyst about the north" to "planner"
    Then the peer has received 1 text
    And received text 1 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message north}", "from": "planner", "to": "analyst", "text": "What is in the north?"}
      """
    When the peer answers "It is cold in the north." on thread "A"
    Then the answer is 200 ack
    And model request 1 for "It is cold in the north." holds exactly:
      | role   | content                                                                                                  |
      | system | You plan the work.                                                                                       |
      | system | You are planner, in agent conversation {ac A} with lab/analyst. It answers for the conversation of alice. |
      | user   | It is cold in the north.                                                                                 |
    And "alice" sees the agent conversation of thread "A" as:
      """
      {"id": "{ac A}", "connection": "lab", "thread": "{thread A}", "role": "planner", "peerRole": "analyst",
       "startedBy": "local", "root": {"kind": "conversation", "id": "{conv alice planner}"}, "state": "open",
       "texts": [{"dir": "out", "message": "{message north}", "text": "What is in the north?", "state": "sent"},
                 {"dir": "in", "message": "{message It is cold in the north.}", "text": "It is cold in the north.", "state": "received"}],
       "turns": [{"turn": 1, "status": "completed", "texts": ["{message It is cold in the north.}"], "output": "Noted, I will tell alice."}]}
      """

  @profile:threads @req:ADR0035-S-03
  Scenario: A role relays a peer's request to a third role rooted in the peer's, and the answer comes back on the first thread
    Given the model answers "Ask the critic about the north" by sending {"to": "lab/critic", "text": "Critic, is the north safe?"}, then says "Asked the critic."
    And the model answers "The north is safe." by sending {"to": "lab/analyst", "text": "The critic says the north is safe."}, then says "Passed it on."
    When the peer sends "Ask the critic about the north" from "analyst" to "planner" on thread "P"
    Then the answer is 200 ack
    And the peer has received 1 text
    And received text 1 is exactly:
      """
      {"v": 1, "thread": "{thread Q}", "message": "{message ask critic}", "from": "planner", "to": "critic", "text": "Critic, is the north safe?"}
      """
    And threads "P" and "Q" are different
    And "dana" sees the agent conversation of thread "P" as:
      """
      {"id": "{ac P}", "connection": "lab", "thread": "{thread P}", "role": "planner", "peerRole": "analyst",
       "startedBy": "peer", "root": {"kind": "agent", "id": "{ac P}"}, "state": "open",
       "texts": [{"dir": "in", "message": "{message Ask the critic about the north}", "text": "Ask the critic about the north", "state": "received"}],
       "turns": [{"turn": 1, "status": "completed", "texts": ["{message Ask the critic about the north}"], "output": "Asked the critic."}]}
      """
    And "dana" sees the agent conversation of thread "Q" as:
      """
      {"id": "{ac Q}", "connection": "lab", "thread": "{thread Q}", "role": "planner", "peerRole": "critic",
       "startedBy": "local", "root": {"kind": "agent", "id": "{ac P}"}, "state": "open",
       "texts": [{"dir": "out", "message": "{message ask critic}", "text": "Critic, is the north safe?", "state": "sent"}],
       "turns": []}
      """
    When the peer answers "The north is safe." on thread "Q"
    Then the answer is 200 ack
    And the peer has received 2 texts
    And received text 2 is exactly:
      """
      {"v": 1, "thread": "{thread P}", "message": "{message passed on}", "from": "planner", "to": "analyst", "text": "The critic says the north is safe."}
      """
    And model request 1 for "The north is safe." holds exactly:
      | role   | content                                                                                 |
      | system | You plan the work.                                                                      |
      | system | You are planner, in agent conversation {ac Q} with lab/critic. It answers for itself.   |
      | user   | The north is safe.                                                                      |

  @profile:threads @req:ADR0035-S-04
  Scenario: A role token with no run has no topic and is refused
    When "role:planner" sends "Anything new?" to "lab/analyst" through its own door
    Then the answer is 409 "no-topic"
    # No sentinel: a text with no topic belongs to no agent conversation, so no later text is
    # ordered after it; the kit waits instead.
    And after 3 seconds the peer has still received 0 texts

  @profile:threads @req:ADR0035-S-04
  Scenario: A role's own door sends only in a running run of that role, rooted in the run's root
    Given the model replies "Surveyed." to "Begin the survey" after a release
    When "alice" creates task "T" titled "Survey the north" with members "bob"
    And "alice" starts a run of "planner" on task "T" with "Begin the survey"
    Then "alice" sees the run on task "T" running
    When "role:planner" sends "A word from the door" to "lab/analyst" through its own door in the run on task "T"
    Then the answer is exactly 202 {"sent": true, "agentConversation": "{ac A}"}
    And the peer has received 1 text
    And received text 1 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message door}", "from": "planner", "to": "analyst", "text": "A word from the door"}
      """
    And "bob" sees the agent conversation of thread "A" as:
      """
      {"id": "{ac A}", "connection": "lab", "thread": "{thread A}", "role": "planner", "peerRole": "analyst",
       "startedBy": "local", "root": {"kind": "task", "id": "{task T}"}, "state": "open",
       "texts": [{"dir": "out", "message": "{message door}", "text": "A word from the door", "state": "sent"}],
       "turns": []}
      """
    When "role:scout" sends "Not my run" to "lab/analyst" through its own door in the run on task "T"
    Then the answer is 409 "no-topic"
    When the model is released
    Then "alice" sees the run on task "T" completed
    When "role:planner" sends "Too late" to "lab/analyst" through its own door in the run on task "T"
    Then the answer is 409 "no-topic"
    # No sentinel: a refused text has no agent conversation of its own to be ordered in; the kit
    # waits instead.
    And after 3 seconds the peer has still received 1 text

  @profile:threads @req:ADR0035-S-05 @fresh-system
  Scenario: Two people with the same pair of roles get two threads and two runs, each with only their own text
    Given the model answers "Alice needs the north map" by sending {"to": "lab/analyst", "text": "A map of the north, please."}, then says "Asked for alice."
    And the model answers "Bob needs the south map" by sending {"to": "lab/analyst", "text": "A map of the south, please."}, then says "Asked for bob."
    And the model replies "I will give alice the north map." to "Here is the north map."
    And the model replies "I will give bob the south map." to "Here is the south map."
    When "alice" says "Alice needs the north map" to "planner"
    Then the peer has received 1 text
    When "bob" says "Bob needs the south map" to "planner"
    Then the peer has received 2 texts
    And received text 1 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message north map}", "from": "planner", "to": "analyst", "text": "A map of the north, please."}
      """
    And received text 2 is exactly:
      """
      {"v": 1, "thread": "{thread B}", "message": "{message south map}", "from": "planner", "to": "analyst", "text": "A map of the south, please."}
      """
    And threads "A" and "B" are different
    And model request 1 for "Bob needs the south map" holds exactly:
      | role   | content                 |
      | system | You plan the work.      |
      | user   | Bob needs the south map |
    When the peer answers "Here is the north map." on thread "A"
    And the peer answers "Here is the south map." on thread "B"
    Then turn 1 of thread "A" is completed
    And turn 1 of thread "B" is completed
    And model request 1 for "Here is the north map." holds exactly:
      | role   | content                                                                                                  |
      | system | You plan the work.                                                                                       |
      | system | You are planner, in agent conversation {ac A} with lab/analyst. It answers for the conversation of alice. |
      | user   | Here is the north map.                                                                                   |
    And model request 1 for "Here is the south map." holds exactly:
      | role   | content                                                                                                |
      | system | You plan the work.                                                                                     |
      | system | You are planner, in agent conversation {ac B} with lab/analyst. It answers for the conversation of bob. |
      | user   | Here is the south map.                                                                                 |

  @profile:threads @req:ADR0035-S-06
  Scenario: A task run sends rooted in the task, and a subtask is a topic of its own
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
    And model request 1 for "Begin the survey" holds exactly:
      | role   | content                                      |
      | system | You plan the work.                           |
      | system | You work on task {task T}: Survey the north. |
      | user   | Begin the survey                             |
    And "bob" sees the agent conversation of thread "A" as:
      """
      {"id": "{ac A}", "connection": "lab", "thread": "{thread A}", "role": "planner", "peerRole": "analyst",
       "startedBy": "local", "root": {"kind": "task", "id": "{task T}"}, "state": "open",
       "texts": [{"dir": "out", "message": "{message survey}", "text": "Survey the north, please.", "state": "sent"}],
       "turns": []}
      """
    When "alice" starts a run of "planner" on task "S" with "Begin the river map"
    Then the peer has received 2 texts
    And received text 2 is exactly:
      """
      {"v": 1, "thread": "{thread B}", "message": "{message river}", "from": "planner", "to": "analyst", "text": "Map the river, please."}
      """
    And threads "A" and "B" are different

  @profile:threads @req:ADR0035-S-02 @fresh-system
  Scenario: A reply on a thread of a person's conversation never becomes a turn of that conversation
    Given the model answers "Ask the analyst about the north" by sending {"to": "lab/analyst", "text": "What is in the north?"}, then says "I asked."
    And the model replies "Noted, I will tell alice." to "It is cold in the north."
    When "alice" says "Ask the analyst about the north" to "planner"
    Then the peer has received 1 text
    And received text 1 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message north}", "from": "planner", "to": "analyst", "text": "What is in the north?"}
      """
    When the peer answers "It is cold in the north." on thread "A"
    Then the answer is 200 ack
    And turn 1 of thread "A" is completed
    And the model has been asked 1 time for "It is cold in the north."
    And turn 1 of "alice"'s conversation with "planner" is completed
    When "alice" reads her conversation with "planner"
    Then the answer is exactly 200 {"id": "{conv alice planner}", "role": "planner", "person": {"tenant": "acme", "actor": "alice"}, "turns": [{"turn": 1, "text": "Ask the analyst about the north", "status": "completed", "output": "I asked."}]}
