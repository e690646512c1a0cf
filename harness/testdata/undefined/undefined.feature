Feature: A feature with a step nobody wrote
  Used by the kit's own tests: a scenario with an undefined step is undefined, never passed.

  @profile:core @req:ADR0122-D1-01
  Scenario: A step that has no definition
    Given alice has started a conversation
    And the moon is made of cheese
