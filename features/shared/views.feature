Feature: A shared conversation, filtered per viewer
  As the lead of an incident whose chat several responders share
  I want each responder to see only what they are cleared for
  So that sharing a conversation never widens what anyone can read

  Every answer is classified by the tools it called and the context it was built on, and every
  entry is shown to each viewer only if the host clears them for all of its classes; otherwise
  they see a bare placeholder. The same holds for the event stream on replay and on resume, for a
  running turn's live text, for the context and the rolling summary a turn is built on, and for
  what an asker's memory put into an answer.

  Background:
    Given the tools and their classes are:
      | tool    | class    |
      | logs    | incident |
      | payroll | hr       |
    And the clearances are:
      | viewer | classes                                    |
      | alice  | incident, hr, unclassified, memory:acme/bob |
      | bob    | incident                                   |

  @profile:shared @req:ADR0122-D10-09 @req:ADR0122-D10-08 @req:ADR0122-D10-13 @configures
  Scenario: Three responders, three views of one incident
    Given alice has started a shared conversation with bob and carol
    And the model calls "logs" with {"service": "pumps"}
    And the model replies "The pump logs show a pressure drop at 02:14."
    When bob sends "what do the pump logs say?"
    Then alice sees turn 1 answered "The pump logs show a pressure drop at 02:14."
    Given the model calls "payroll" with {"team": "night shift"}
    And the model replies "Three night-shift engineers were on call."
    When alice sends "who was on call?"
    Then alice sees turn 2 answered "Three night-shift engineers were on call."
    When carol sends "what happened tonight?"
    Then alice sees turn 3 answered "re: what happened tonight?"
    And alice sees the history:
      | ord | turn | role      | status   | asker | classes     | text                                          |
      | 1   | 1    | user      | accepted | bob   |             | what do the pump logs say?                    |
      | 2   | 1    | assistant | complete | bob   | incident    | The pump logs show a pressure drop at 02:14.  |
      | 3   | 2    | user      | accepted | alice | incident    | who was on call?                              |
      | 4   | 2    | assistant | complete | alice | hr incident | Three night-shift engineers were on call.     |
      | 5   | 3    | user      | accepted | carol |             | what happened tonight?                        |
      | 6   | 3    | assistant | complete | carol |             | re: what happened tonight?                    |
    And bob sees the history:
      | ord | turn | role      | status     | asker | text                                         |
      | 1   | 1    | user      | accepted   | bob   | what do the pump logs say?                   |
      | 2   | 1    | assistant | complete   | bob   | The pump logs show a pressure drop at 02:14. |
      | 3   | 2    | user      | accepted   | alice | who was on call?                             |
      | 4   | 2    | assistant | restricted | alice | -                                            |
      | 5   | 3    | user      | accepted   | carol | what happened tonight?                       |
      | 6   | 3    | assistant | complete   | carol | re: what happened tonight?                   |
    And carol sees the history:
      | ord | turn | role      | status     | asker | text                       |
      | 1   | 1    | user      | accepted   | bob   | what do the pump logs say? |
      | 2   | 1    | assistant | restricted | bob   | -                          |
      | 3   | 2    | user      | restricted | alice | -                          |
      | 4   | 2    | assistant | restricted | alice | -                          |
      | 5   | 3    | user      | accepted   | carol | what happened tonight?     |
      | 6   | 3    | assistant | complete   | carol | re: what happened tonight? |
    And the restricted entries carol sees carry only turn, role, status, cursor, ord, time and asker
    And the request to the model for "what happened tonight?" holds no earlier turns
    And request 3 to the model holds the messages:
      | role      | content                                      |
      | user      | what do the pump logs say?                   |
      | assistant | The pump logs show a pressure drop at 02:14. |
      | user      | who was on call?                             |
    And request 5 to the model holds the messages:
      | role | content                |
      | user | what happened tonight? |
    When bob sends "anything new?"
    Then alice sees turn 4 answered "re: anything new?"
    And request 6 to the model holds the messages:
      | role      | content                                      |
      | user      | what do the pump logs say?                   |
      | assistant | The pump logs show a pressure drop at 02:14. |
      | user      | what happened tonight?                       |
      | assistant | re: what happened tonight?                   |
      | user      | anything new?                                |

  @profile:shared @req:ADR0122-D10-08 @configures
  Scenario: An answer that called a tool without a declared class is classified unclassified
    # spec/requirements.yaml, ADR0122-D10-08: a tool without a class adds "unclassified"; bob is
    # not cleared for it, so he sees the answer as a placeholder.
    Given the tool "weather" is declared with no class
    And alice has started a shared conversation with bob
    And the model calls "weather" with {"city": "Oslo"}
    And the model replies "Sunny in Oslo."
    When alice sends "what is the weather?"
    Then alice sees turn 1 answered "Sunny in Oslo."
    And alice sees the history:
      | ord | turn | role      | status   | asker | classes      | text                 |
      | 1   | 1    | user      | accepted | alice |              | what is the weather? |
      | 2   | 1    | assistant | complete | alice | unclassified | Sunny in Oslo.       |
    And bob sees the history:
      | ord | turn | role      | status     | asker | text                 |
      | 1   | 1    | user      | accepted   | alice | what is the weather? |
      | 2   | 1    | assistant | restricted | alice | -                    |

  @profile:shared @req:ADR0122-D10-10 @configures
  Scenario Outline: Only an exact true clears a viewer
    Given the clearance service answers <answer> for carol
    And alice has started a shared conversation with bob and carol
    And the model calls "logs" with {}
    When bob sends "read the logs"
    Then alice sees turn 1 answered "re: read the logs"
    And carol sees the reply to turn 1 as restricted

    Examples:
      | answer  |
      | "yes"   |
      | 1       |
      | "true"  |
      | {}      |

  @profile:shared @req:ADR0122-D10-11 @configures
  Scenario: The event stream filters per viewer, on replay and on resume
    Given alice has started a shared conversation with bob and carol
    And the model calls "logs" with {}
    When bob sends "read the logs"
    Then alice sees turn 1 answered "re: read the logs"
    When carol opens the event stream
    Then carol's stream shows the reply to turn 1 only as a restricted placeholder
    When carol reconnects from the first record
    Then carol's stream shows the reply to turn 1 only as a restricted placeholder

  @profile:shared @req:ADR0122-D10-11 @configures
  Scenario: A participant removed while their stream is open is delivered nothing written after, even before re-authorization
    Given alice has started a shared conversation with bob
    When alice sends "before"
    Then alice sees turn 1 answered "re: before"
    When bob opens the event stream
    And alice opens the event stream
    Then bob's stream delivers the reply of turn 1 with the text "re: before"
    When alice removes bob from the participants
    And alice sends "after the removal"
    Then alice's stream delivers the reply of turn 2 with the text "re: after the removal"
    And bob's stream got exactly these events:
      | event   | turn | role      | status   | text       |
      | status  |      |           |          |            |
      | message | 1    | user      | accepted | before     |
      | message | 1    | assistant | complete | re: before |

  @profile:shared @req:ADR0122-D10-12 @configures
  Scenario: A running turn's live text goes to its asker alone
    Given alice has started a shared conversation with bob
    And the model streams "secret " "figures" and waits
    When alice opens the event stream
    And bob opens the event stream
    And bob sends "show me the figures"
    And the model has streamed its first words
    Then bob's stream shows "secret figures"
    When the model is released
    Then alice sees turn 1 answered "secret figures"
    And bob's stream delivers the reply of turn 1 with the text "secret figures"
    When bob sends "that is all"
    Then alice's stream got exactly these events before the message of turn 2:
      | event   | turn | role      | status   | text                |
      | status  |      |           |          |                     |
      | message | 1    | user      | accepted | show me the figures |
      | message | 1    | assistant | complete | secret figures      |

  @profile:shared @req:ADR0122-D10-12 @configures
  Scenario: A participant who attaches while another's turn is running gets no partial of it
    Given alice has started a shared conversation with bob
    And the model streams "secret " "figures" and waits
    When bob sends "show me the figures"
    And the model has streamed its first words
    And alice opens the event stream
    And bob's other token opens the event stream
    Then bob's other token's stream shows a partial "secret figures" for turn 1
    When the model is released
    Then alice sees turn 1 answered "secret figures"
    When bob sends "that is all"
    Then alice's stream got exactly these events before the message of turn 2:
      | event   | turn | role      | status   | text                |
      | status  |      |           |          |                     |
      | message | 1    | user      | accepted | show me the figures |
      | message | 1    | assistant | complete | secret figures      |

  @profile:shared @req:ADR0122-D10-12 @configures
  Scenario Outline: A running turn's live text goes to no identity that differs from the asker's in one field alone
    Given alice has started a shared conversation with bob and <principal>
    And the model streams "secret " "figures" and waits
    When <principal> opens the event stream
    And bob opens the event stream
    And bob sends "show me the figures"
    And the model has streamed its first words
    Then bob's stream shows "secret figures"
    When the model is released
    Then bob's stream delivers the reply of turn 1 with the text "secret figures"
    When bob sends "that is all"
    Then <principal>'s stream got exactly these events before the message of turn 2:
      | event   | turn | role      | status   | text                |
      | status  |      |           |          |                     |
      | message | 1    | user      | accepted | show me the figures |
      | message | 1    | assistant | complete | secret figures      |

    Examples:
      | principal            |
      | bob at evil          |
      | bob without a tenant |
      | bob for carol        |

  @profile:shared @req:ADR0122-D10-12 @configures
  Scenario: A running turn's live text goes to the asker's every token
    Given alice has started a shared conversation with bob
    And the model streams "secret " "figures" and waits
    When bob's other token opens the event stream
    And bob sends "show me the figures"
    And the model has streamed its first words
    Then bob's other token's stream shows "secret figures"
    When the model is released
    And bob sends "that is all"
    Then bob's other token's stream got exactly these events before the message of turn 2:
      | event   | turn | role      | status   | text                |
      | status  |      |           |          |                     |
      | message | 1    | user      | accepted | show me the figures |
      | delta   | 1    |           |          | "secret "           |
      | delta   | 1    |           |          | figures             |
      | message | 1    | assistant | complete | secret figures      |

  @profile:shared @req:ADR0122-D10-09 @configures
  Scenario Outline: The asker's own entries are shown to the asker's every token, and to no look-alike
    Given alice has started a shared conversation with bob and <principal>
    And the model calls "payroll" with {"team": "night shift"}
    And the model replies "Three night-shift engineers were on call."
    When bob sends "who was on call?"
    Then alice sees turn 1 answered "Three night-shift engineers were on call."
    And <principal> sees <view>

    Examples:
      | principal            | view                                                         |
      | bob's other token    | turn 1 answered "Three night-shift engineers were on call." |
      | bob at evil          | the reply to turn 1 as restricted                            |
      | bob without a tenant | the reply to turn 1 as restricted                            |
      | bob for carol        | the reply to turn 1 as restricted                            |

  @profile:shared @req:ADR0122-D10-09 @configures
  Scenario Outline: The host is asked about the viewer's whole identity
    Given alice has started a shared conversation with bob and <principal>
    And the model calls "logs" with {}
    When bob sends "read the logs"
    Then alice sees turn 1 answered "re: read the logs"
    When <principal> reads the whole history
    Then the clearance service was asked about <principal>'s whole identity

    Examples:
      | principal            |
      | bob at evil          |
      | bob without a tenant |
      | bob for carol        |

  @profile:shared @req:ADR0122-D10-13 @configures
  Scenario Outline: A turn's context holds no restricted turn of an identity that differs from its asker's in one field alone
    Given the setting "shared.narrowed" is ["acme/bob~carol"]
    And alice has started a shared conversation with bob and <principal>
    And the model calls "payroll" with {"team": "night shift"}
    And the model replies "Three night-shift engineers were on call."
    When bob sends "who was on call?"
    Then alice sees turn 1 answered "Three night-shift engineers were on call."
    When <principal> sends "and now?"
    Then alice sees turn 2 answered "re: and now?"
    And request 3 to the model holds the messages:
      | role | content  |
      | user | and now? |

    Examples:
      | principal            |
      | bob at evil          |
      | bob without a tenant |
      | bob for carol        |

  @profile:shared @req:ADR0122-D10-13 @configures
  Scenario: A turn's context holds its asker's own restricted turns, whichever token asked
    Given alice has started a shared conversation with bob
    And the model calls "payroll" with {"team": "night shift"}
    And the model replies "Three night-shift engineers were on call."
    When bob sends "who was on call?"
    Then alice sees turn 1 answered "Three night-shift engineers were on call."
    When bob's other token sends "and now?"
    Then alice sees turn 2 answered "re: and now?"
    And request 3 to the model holds the messages:
      | role      | content                                   |
      | user      | who was on call?                          |
      | assistant | Three night-shift engineers were on call. |
      | user      | and now?                                  |

  @profile:shared @req:ADR0122-D10-14 @configures
  Scenario: The rolling summary is built only from unrestricted turns
    Turn 1 leaves the window once turn 2 is answered; whatever the summarizer is handed for it is
    handed before the request to the model of the turn after it leaves (spec/prompt.md §3), so the
    fourth turn's answer is the sentinel for a summary built late.

    Given the setting "conversation.maxWindowTurns" is 1
    And alice has started a shared conversation with bob
    And the model calls "logs" with {}
    When bob sends "read the logs"
    Then alice sees turn 1 answered "re: read the logs"
    When bob sends "thanks"
    Then alice sees turn 2 answered "re: thanks"
    When bob sends "anything else?"
    Then alice sees turn 3 answered "re: anything else?"
    When bob sends "one more"
    Then alice sees turn 4 answered "re: one more"
    And the model has been asked 5 times
    And the summarizer was never handed the words "read the logs"

  @profile:shared @req:ADR0122-D10-16 @configures
  Scenario: An answer that drew on someone's memory is filtered like any other
    Given the agent has memory
    And bob's memory holds "pump 7 was patched by bob last week"
    And alice has started a shared conversation with bob and carol
    And the model replies "pump 7 was patched last week, by you"
    When bob sends "what do I know about pump 7?"
    Then alice sees turn 1 answered "pump 7 was patched last week, by you"
    And alice sees the reply to turn 1 classed "memory:acme/bob"
    And carol sees the reply to turn 1 as restricted

  @profile:shared @req:ADR0122-D10-16 @configures
  Scenario Outline: Memory is per asker: an identity that differs from bob's in one field alone draws on none of his
    Given the agent has memory
    And the setting "shared.narrowed" is ["acme/bob~carol"]
    And bob's memory holds "pump 7 was patched by bob last week"
    And alice has started a shared conversation with bob and <principal>
    When <principal> sends "what do I know about pump 7?"
    Then alice sees turn 1 answered "re: what do I know about pump 7?"
    And alice sees the reply to turn 1 with no class "memory:acme/bob"
    And no message of any request to the model holds "pump 7 was patched by bob last week"

    Examples:
      | principal            |
      | bob at evil          |
      | bob without a tenant |
      | bob for carol        |

  @profile:shared @req:ADR0122-D10-16 @configures
  Scenario: Memory is per asker: another token of the asker draws on it
    Given the agent has memory
    And bob's memory holds "pump 7 was patched by bob last week"
    And alice has started a shared conversation with bob
    And the model replies "pump 7 was patched last week, by you"
    When bob's other token sends "what do I know about pump 7?"
    Then alice sees turn 1 answered "pump 7 was patched last week, by you"
    And alice sees the reply to turn 1 classed "memory:acme/bob"
    And some message of a request to the model holds "pump 7 was patched by bob last week"

  @profile:shared @req:ADR0122-D10-15 @configures
  Scenario: A summary too big for one asker's slice is left out of that asker's turn only
    Given the settings are:
      | setting                                 | value |
      | conversation.budget.contextWindow       | 400   |
      | conversation.budget.reserveOutputTokens | 0     |
      | conversation.maxWindowTurns             | 1     |
    And the summarizer answers a summary of 400 characters
    And the summarizer then fails with status 503
    And alice has started a shared conversation with bob
    When alice sends "question one"
    Then alice sees turn 1 answered "re: question one"
    When alice sends "question two"
    Then alice sees turn 2 answered "re: question two"
    When alice sends "question three"
    Then alice sees turn 3 answered "re: question three"
    When bob sends a message of 1000 characters
    Then alice sees turn 4 answered "re: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
    And request 4 to the model carries no summary
    When alice sends "and now?"
    Then alice sees turn 5 answered "re: and now?"
    And request 5 to the model carries that summary, fenced
