Feature: Several nodes serve each execution in one place
  As an operator running the system as several nodes on one database
  I want each conversation served where it runs, and a node's death to touch only its own
  So that a client can spare the hop, and the other nodes' conversations never wait for a takeover

  Every answer names the node that served it (Loom-Node). The kit learns which node runs a
  conversation from its answers alone: which node or partition an id falls in is the system's
  business. These scenarios need a system the kit runs as several nodes behind one address
  (loomcheck run --nodes N, and --partitions P for the second); on any other they are not
  applicable, and the report says why.

  @profile:durability @req:ADR0122-NODE-01
  Scenario: A request sent to the node that served its execution is served there, without a hop
    Given the system runs as at least 2 nodes
    And alice has started a conversation
    When alice sends every further request straight to the node that served it
    And alice opens the event stream
    And alice sends "check the pumps" with message id "m-1"
    Then turn 1 is answered "re: check the pumps"
    And alice's stream delivers the reply of turn 1 with the text "re: check the pumps"
    And the history holds:
      | ord | turn | role      | status   | text                |
      | 1   | 1    | user      | accepted | check the pumps     |
      | 2   | 1    | assistant | complete | re: check the pumps |
    And the model has been asked 1 time in all
    And every answer from that node named it
    And the history read at every other node is the same, each answer naming that node

  @profile:durability @req:ADR0122-NODE-02 @crash
  Scenario: A node's death pauses only the executions it ran
    Given the system runs as at least 2 nodes of at least 2 partitions
    And alice has started conversations until "first" and "second" are served by different nodes
    And alice has had 1 turn answered
    And alice has had 1 turn answered in conversation "second"
    And alice remembers the history
    And alice opens the event stream of "second" at the node that serves it
    And the model streams "Let me" and waits
    And alice sends "check the pumps" with message id "m-9"
    And the model has been asked 3 times
    When the node that serves "first" is killed
    Then a read of "second" at its node is answered there while a read of "first" at that node waits
    And the read of "first" is then answered by a surviving node, the remembered records whole
    When alice, retrying until answered, sends "check the pumps" again with message id "m-9"
    Then turn 2 is answered "re: check the pumps"
    And the history is the remembered one, byte for byte, followed by:
      | ord | turn | role      | status   | text                |
      | 3   | 2    | user      | accepted | check the pumps     |
      | 4   | 2    | assistant | complete | re: check the pumps |
    And the model has been asked 4 times in all
    And alice's event stream of "second", open since before the kill, delivers the reply to "check the valves" sent to its node
