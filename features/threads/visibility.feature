Feature: Who reads an agent conversation
  As a person of the box
  I want to read the agent conversations of my own topics, and nobody else's
  So that what was asked and answered for me is mine to see, and others' stays theirs

  Visibility follows the root: the person of a conversation, the members of a task, the box's
  members and the connection's owner for one the peer started. A role reads its own. Anyone else
  gets the same 404 as for an agent conversation that never existed; when the root is gone, only
  the connection's owner reads it.

  Background:
    Given the box is connected to the peer "lab"

  @profile:threads @req:ADR0035-V-01
  Scenario: An agent conversation of a person's conversation is read by that person and its role alone
    Given the model answers "Ask the analyst" by sending {"to": "lab/analyst", "text": "Any news?"}, then says "Asked."
    When "alice" says "Ask the analyst" to "planner"
    Then the peer has received 1 text
    And received text 1 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message news}", "from": "planner", "to": "analyst", "text": "Any news?"}
      """
    And "alice" can read the agent conversation of thread "A"
    And "role:planner" can read the agent conversation of thread "A"
    And "bob" cannot read the agent conversation of thread "A"
    And "olga" cannot read the agent conversation of thread "A"
    And "dana" cannot read the agent conversation of thread "A"
    And "role:scout" cannot read the agent conversation of thread "A"
    And "mallory" cannot read the agent conversation of thread "A"

  @profile:threads @req:ADR0035-V-01
  Scenario: An agent conversation of a task is read by the task's members
    Given the model answers "Begin the survey" by sending {"to": "lab/analyst", "text": "Survey the north, please."}, then says "Survey asked."
    When "alice" creates task "T" titled "Survey the north" with members "bob"
    And "alice" starts a run of "planner" on task "T" with "Begin the survey"
    Then the peer has received 1 text
    And received text 1 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message survey}", "from": "planner", "to": "analyst", "text": "Survey the north, please."}
      """
    And "alice" can read the agent conversation of thread "A"
    And "bob" can read the agent conversation of thread "A"
    And "carol" cannot read the agent conversation of thread "A"
    And "dana" cannot read the agent conversation of thread "A"
    When "alice" adds "carol" to task "T"
    Then "carol" can read the agent conversation of thread "A"
    When "alice" removes "bob" from task "T"
    Then "bob" cannot read the agent conversation of thread "A"

  @profile:threads @req:ADR0035-V-01
  Scenario: An agent conversation the peer started is read by the box's members and the connection's owner
    Given the model replies "Hello, analyst." to "Hello planner"
    When the peer sends "Hello planner" from "analyst" to "planner" on thread "K"
    Then the answer is 200 ack
    And "dana" can read the agent conversation of thread "K"
    And "olga" can read the agent conversation of thread "K"
    And "role:planner" can read the agent conversation of thread "K"
    And "alice" cannot read the agent conversation of thread "K"
    And "role:scout" cannot read the agent conversation of thread "K"

  @profile:threads @req:ADR0035-V-02
  Scenario: When the root is gone, only the connection's owner reads the agent conversation
    Given the model answers "Ask the analyst" by sending {"to": "lab/analyst", "text": "Any news?"}, then says "Asked."
    When "alice" says "Ask the analyst" to "planner"
    Then the peer has received 1 text
    And received text 1 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message news}", "from": "planner", "to": "analyst", "text": "Any news?"}
      """
    And "alice" can read the agent conversation of thread "A"
    When "alice" deletes her conversation with "planner"
    Then the answer is 204
    And "olga" sees thread "A" rooted "gone"
    And "olga" can read the agent conversation of thread "A"
    And "alice" cannot read the agent conversation of thread "A"
    And "dana" cannot read the agent conversation of thread "A"

  @profile:threads @req:ADR0035-V-03 @fresh-system
  Scenario: A role's agent history with a peer role lists every agent conversation between them, a closed one too, and only the role reads it
    Given the model answers "Ask the analyst" by sending {"to": "lab/analyst", "text": "Any news?"}, then says "Asked."
    And the model replies "Noted." to "Hello planner"
    And the model replies "Critique noted." to "A critique"
    When "alice" says "Ask the analyst" to "planner"
    Then the peer has received 1 text
    And received text 1 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message news}", "from": "planner", "to": "analyst", "text": "Any news?"}
      """
    When the peer sends "Hello planner" from "analyst" to "planner" on thread "B"
    Then the answer is 200 ack
    And turn 1 of thread "B" is completed
    When the peer sends "A critique" from "critic" to "planner" on thread "C"
    Then the answer is 200 ack
    And turn 1 of thread "C" is completed
    When "alice" deletes her conversation with "planner"
    Then the answer is 204
    And "olga" sees thread "A" rooted "gone"
    When "role:planner" reads the agent history of "planner" with "lab/analyst"
    Then the agent history holds the agent conversations of threads "A", "B"
    When "role:planner" reads the agent history of "planner" with "lab/critic"
    Then the agent history holds the agent conversations of thread "C"
    When "role:scout" reads the agent history of "scout" with "lab/analyst"
    Then the agent history holds the agent conversations of no thread
    When "role:scout" reads the agent history of "planner" with "lab/analyst"
    Then the answer is the uniform 404
    When "olga" reads the agent history of "planner" with "lab/analyst"
    Then the answer is the uniform 404
    When "role:planner" reads the agent history of "planner" with "elsewhere/analyst"
    Then the answer is the uniform 404
    When "role:planner" reads the agent history of "planner" with "lab"
    Then the answer is exactly 400 {"error": "bad request", "detail": "peer"}

  @profile:threads @req:ADR0035-V-04 @fresh-system
  Scenario: A role is the principal the box issued to it, not a caller whose actor is spelled like it
    Given the model answers "Ask the analyst" by sending {"to": "lab/analyst", "text": "Any news?"}, then says "Asked."
    When "alice" says "Ask the analyst" to "planner"
    Then the peer has received 1 text
    And received text 1 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message news}", "from": "planner", "to": "analyst", "text": "Any news?"}
      """
    And "role:planner" can read the agent conversation of thread "A"
    And "impostor" cannot read the agent conversation of thread "A"
    When "impostor" stops the agent conversation of thread "A"
    Then the answer is the uniform 404
    When "impostor" reads the agent history of "planner" with "lab/analyst"
    Then the answer is the uniform 404
    When "role:planner" reads the agent history of "planner" with "lab/analyst"
    Then the agent history holds the agent conversations of thread "A"

  @profile:threads @req:ADR0035-V-01
  Scenario: The person of a conversation root is the whole identity: the same actor of another tenant, or acting for another, reads and stops nothing
    Given the model answers "Ask the analyst" by sending {"to": "lab/analyst", "text": "Any news?"}, then says "Asked."
    When "alice" says "Ask the analyst" to "planner"
    Then the peer has received 1 text
    And received text 1 is exactly:
      """
      {"v": 1, "thread": "{thread A}", "message": "{message news}", "from": "planner", "to": "analyst", "text": "Any news?"}
      """
    And "alice" can read the agent conversation of thread "A"
    And "alice at globex" cannot read the agent conversation of thread "A"
    And "alice for bob" cannot read the agent conversation of thread "A"
    When "alice at globex" stops the agent conversation of thread "A"
    Then the answer is the uniform 404
