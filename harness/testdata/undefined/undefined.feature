Feature: A feature with a step nobody wrote
  Used by the kit's own tests: a scenario with an undefined step is undefined, never passed.

  @profile:core @req:ADR0122-D1-01
  Scenario Outline: A step that has no definition, followed by others (<what>)
    Given alice has started a conversation
    And the moon is made of <what>
    When alice sends "hello"
    Then turn 1 is answered "re: hello"

    Examples:
      | what   |
      | cheese |
