Feature: The roots a run works on
  As a person who asks a role of the box for something
  I want my conversation with a role, and the tasks I share with others, to be the topics the
  box's agents work on
  So that what is done for me, or for a task, stays with it

  A person has at most one conversation with each role: asking for it again returns the same
  one, and another person gets their own. A task has an owner and members; it can be finished
  and deleted with its subtasks, and only its members see it: anyone else gets the same 404 as
  for a task that never existed.

  Background:
    Given the box is connected to the peer "lab"

  @profile:threads @req:ADR0035-R-01
  Scenario: At most one conversation per person and role; another person gets another
    When "alice" opens her conversation with "planner"
    And "alice" opens her conversation with "planner"
    And "bob" opens his conversation with "planner"
    And "alice" opens her conversation with "scout"
    Then conversations "alice planner" and "bob planner" are different
    And conversations "alice planner" and "alice scout" are different
    Given the model replies "Hello, alice." to "Hi planner"
    When "alice" says "Hi planner" to "planner"
    And "alice" reads her conversation with "planner"
    Then the answer is 200
    When "alice" deletes her conversation with "planner"
    Then the answer is 204

  @profile:threads @req:ADR0035-R-01
  Scenario: A role token or a role the box does not have gets the uniform 404
    When "role:planner" reads her conversation with "planner"
    Then the answer is the uniform 404
    When "alice" reads her conversation with "cook"
    Then the answer is the uniform 404

  @profile:threads @req:ADR0035-R-02
  Scenario: A task is made, shared, finished and deleted with its subtasks
    When "alice" creates task "T" titled "Survey the north" with members "bob"
    And "alice" creates subtask "S" of "T" titled "Map the river"
    Then tasks "T" and "S" are different
    When "bob" reads task "T"
    Then the answer is 200
    When "alice" adds "carol" to task "T"
    Then the answer is 200
    When "carol" reads task "T"
    Then the answer is 200
    When "alice" removes "carol" from task "T"
    Then the answer is 200
    When "carol" reads task "T"
    Then the answer is the uniform 404
    When "bob" finishes task "T"
    Then the answer is 200
    When "alice" deletes task "T"
    Then the answer is 204
    When "alice" reads task "T"
    Then the answer is the uniform 404
    When "alice" reads task "S"
    Then the answer is the uniform 404

  @profile:threads @req:ADR0035-R-02
  Scenario: Anyone who is not a member gets the uniform 404 on every task route
    When "alice" creates task "T" titled "Survey the north" with members "bob"
    And "carol" reads task "T"
    Then the answer is the uniform 404
    When "carol" finishes task "T"
    Then the answer is the uniform 404
    When "carol" deletes task "T"
    Then the answer is the uniform 404
    When "carol" adds "carol" to task "T"
    Then the answer is the uniform 404
    When "role:planner" reads task "T"
    Then the answer is the uniform 404
