Feature: Role-marked values in the session stream are drawn for the one who asked
  As a participant of a shared chat cleared for fewer roles than the others
  I want a tool's record shown to me with exactly the values of the roles I hold
  So that sharing a chat never shows anyone what only some of its people may read

  Background:
    Given the tools and their classes are:
      | tool  | class    |
      | staff | incident |
    And the clearances are:
      | viewer | classes      |
      | alice  | incident, hr |
      | bob    | incident     |

  @profile:stream @req:ADR0052-V-02
  Scenario: An asker who holds a field's role receives the field's value itself
    Given the tool "staff" answers {"block": {"kind": "record", "type": "person", "fields": {"name": "Ann", "salary": {"role": "hr", "value": 5200}, "note": {"role": "hr", "value": null}}, "read_roles": ["hr"]}}
    And alice has started a shared conversation with bob
    And the model calls "staff" with {}
    And the model replies "Ann is on the night shift."
    When alice follows the session stream over WebSocket
    And alice sends "who is on call?"
    Then alice's WebSocket reader got for call "call_1" exactly the block:
      """
      {"kind": "record", "type": "person", "fields": {"name": "Ann", "salary": 5200, "note": null}, "read_roles": ["hr"]}
      """

  @profile:stream @req:ADR0052-V-02
  Scenario Outline: A result holding what its asker may not read reaches the asker withheld
    Given the tool "staff" answers <result>
    And alice has started a shared conversation with bob
    And the model calls "staff" with {}
    And the model replies "Ann is on the night shift."
    When bob follows the session stream over WebSocket
    And bob sends "who is on call?"
    Then bob's WebSocket reader got for call "call_1" the block withheld from its asker

    Examples:
      | result                                                                                                                  |
      | {"block": {"kind": "record", "type": "person", "fields": {"name": "Ann", "salary": {"role": "hr", "value": 5200}}}}    |
      | {"block": {"kind": "record", "type": "person", "fields": {"name": "Ann"}, "read_roles": ["hr", "payroll"]}}            |
