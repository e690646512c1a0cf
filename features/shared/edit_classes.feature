Feature: An edit in a shared conversation is classified like the words it quotes
  As a responder cleared for less than the whole incident
  I want an edit that quotes restricted words to be as restricted as they are
  So that editing a question never carries its classified context past a viewer's clearance

  An edit's prompt quotes the edited question whatever the budget kept of the window, so the
  classes of the edited turn join the classes of the edit's own record (and so of its answer),
  even when that turn no longer fits beside the prompt. Below, a question of 1 200 characters
  leaves no room for turn 1 in turn 2's context, and the edit leaves no room for either.

  @profile:shared @req:ADR0122-R17b-21 @configures
  Scenario: An edit of a turn the budget left out of the context still carries that turn's classes
    Given the tools and their classes are:
      | tool | class    |
      | logs | incident |
    And the clearances are:
      | viewer | classes                |
      | alice  | incident, unclassified |
      | bob    | incident, unclassified |
    And the settings are:
      | setting                                 | value |
      | conversation.budget.contextWindow       | 400   |
      | conversation.budget.reserveOutputTokens | 0     |
    And alice has started a shared conversation with bob
    And the model calls "logs" with {"service": "pumps"}
    And the model replies "The pump logs show a pressure drop."
    When bob sends "what do the pump logs say?"
    Then alice sees turn 1 answered "The pump logs show a pressure drop."
    When bob sends a message of 1200 characters
    Then alice sees turn 2 answered "re: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
    When bob sends "what do the pump logs say now?" as an edit of record 1
    Then alice sees the history:
      | ord | turn | role      | status   | asker | classes  | editOf |
      | 1   | 1    | user      | accepted | bob   |          |        |
      | 2   | 1    | assistant | complete | bob   | incident |        |
      | 3   | 2    | user      | accepted | bob   |          |        |
      | 4   | 2    | assistant | complete | bob   |          |        |
      | 5   | 3    | user      | accepted | bob   | incident | 1      |
      | 6   | 3    | assistant | complete | bob   | incident |        |
    And the last user message of request 4 to the model quotes "what do the pump logs say?" and says "what do the pump logs say now?"

  @profile:shared @req:ADR0122-R17b-22 @configures
  Scenario: A participant's edit of another participant's message is one rejected record
    # spec/http.md: an edit names one of the sender's own earlier accepted user records; another
    # participant's is not one, so nothing of it is quoted and no turn runs.
    Given alice has started a shared conversation with bob
    When alice sends "check pump 3"
    Then alice sees turn 1 answered "re: check pump 3"
    When bob sends "check pump 4" as an edit of record 1
    And bob sends "are you there?"
    Then alice sees turn 2 answered "re: are you there?"
    And record 3 is rejected with reason "edit-invalid"
    And alice sees the history:
      | ord | turn | role      | status   | asker | text             |
      | 1   | 1    | user      | accepted | alice | check pump 3     |
      | 2   | 1    | assistant | complete | alice | re: check pump 3 |
      | 3   | 0    | user      | rejected | bob   | -                |
      | 4   | 2    | user      | accepted | bob   | are you there?   |
      | 5   | 2    | assistant | complete | bob   | re: are you there? |
    And the model has been asked 2 times in all
    And request 2 to the model holds the messages:
      | role      | content          |
      | user      | check pump 3     |
      | assistant | re: check pump 3 |
      | user      | are you there?   |
