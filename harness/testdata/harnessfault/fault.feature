Feature: A feature the kit itself gets wrong
  Used by the kit's own tests: it must be reported as a harness error, never as a failure of the
  system under test.

  @req:ADR0122-D1-01
  Scenario: A scenario without a profile is the kit's fault
    Given alice has started a conversation

  @profile:core @req:ADR0122-D1-01
  Scenario: A step the kit cannot run is the kit's fault
    Given alice has started a conversation
    And the tool "not-declared-in-time" needs approval
