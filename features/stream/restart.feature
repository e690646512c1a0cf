Feature: A reply left waiting by a restart
  As a person whose question was being answered when the system stopped
  I want the answer to come back soon after the system is up again, or to be told to ask again
  So that I never wait forever for a reply, and never get one after I was told it failed

  A turn the stream showed asked and unanswered when the system stopped is recovered and ends as
  it would, within stream.resumeWaitMs (60000 by default) counted from the start of the system.
  A turn with no reply by then is given up: the stream logs status {state: "failed", note:
  "couldn't resume, ask again"}, naming no reply, the turn is stopped at its abort checkpoint,
  and nothing the turn produces afterwards is shown. A turn that ends within the wait gets no
  such status.

  @profile:stream @req:ADR0052-R-05 @crash @configures
  Scenario: A turn that has not resumed within the wait is given up with one failed status, stopped, and shown no more
    Given the setting "stream.resumeWaitMs" is 1000
    And barge-in is on
    And alice has started a conversation
    And the model streams "first " "try" to "try it" one piece at a time
    And the model replies "late" to "try it" after a release
    And the model replies "fresh" to "ask again"
    When alice follows the session stream over WebSocket
    And alice sends "try it"
    And alice's WebSocket reader reaches cursor 2
    And the system is killed and restarted
    And alice's WebSocket reader reaches cursor 4
    Then turn 1 is interrupted with partial ""
    When the model is released
    And alice sends "ask again"
    Then turn 2 is answered "fresh"
    And alice's WebSocket reader's frames are exactly:
      | cur | type         | message | turn | data                                                  |
      | 1   | user-message | m1      | 1    | {"message":"m1","state":"sent","text":"try it"}       |
      | 2   | text-delta   | a:1     | 1    | {"text":"first "}                                     |
      | 3   | status       |         | 1    | {"message":"a:1","state":"restarted"}                 |
      | 4   | status       |         | 1    | {"state":"failed","note":"couldn't resume, ask again"} |
      | 5   | user-message | m2      | 2    | {"message":"m2","state":"sent","text":"ask again"}    |
      | 6   | text-delta   | a:2     | 2    | {"text":"fresh"}                                      |
      | 7   | text-done    | a:2     | 2    | {"status":"complete","text":"fresh"}                  |
    And the model was asked for exactly, in order:
      | last user message |
      | try it            |
      | try it            |
      | ask again         |

  @profile:stream @req:ADR0052-R-05 @crash @configures
  Scenario: A turn that cannot be stopped and answers after the wait is given up all the same: its late reply is never shown
    Given the setting "stream.resumeWaitMs" is 1000
    And barge-in is off
    And alice has started a conversation
    And the model streams "first " "try" to "try it" one piece at a time
    And the model replies "late" to "try it" after a release
    And the model replies "fresh" to "ask again"
    When alice follows the session stream over WebSocket
    And alice sends "try it"
    And alice's WebSocket reader reaches cursor 2
    And the system is killed and restarted
    And alice's WebSocket reader reaches cursor 4
    And the model is released
    Then turn 1 is answered "late"
    When alice sends "ask again"
    Then turn 2 is answered "fresh"
    And alice's WebSocket reader's frames are exactly:
      | cur | type         | message | turn | data                                                  |
      | 1   | user-message | m1      | 1    | {"message":"m1","state":"sent","text":"try it"}       |
      | 2   | text-delta   | a:1     | 1    | {"text":"first "}                                     |
      | 3   | status       |         | 1    | {"message":"a:1","state":"restarted"}                 |
      | 4   | status       |         | 1    | {"state":"failed","note":"couldn't resume, ask again"} |
      | 5   | user-message | m2      | 2    | {"message":"m2","state":"sent","text":"ask again"}    |
      | 6   | text-delta   | a:2     | 2    | {"text":"fresh"}                                      |
      | 7   | text-done    | a:2     | 2    | {"status":"complete","text":"fresh"}                  |
    When the system is killed and restarted
    And alice reads the session stream over SSE from 0
    Then alice's SSE reader's frames are exactly:
      | cur | type         | message | turn | data                                                  |
      | 1   | user-message | m1      | 1    | {"message":"m1","state":"sent","text":"try it"}       |
      | 2   | text-delta   | a:1     | 1    | {"text":"first "}                                     |
      | 3   | status       |         | 1    | {"message":"a:1","state":"restarted"}                 |
      | 4   | status       |         | 1    | {"state":"failed","note":"couldn't resume, ask again"} |
      | 5   | user-message | m2      | 2    | {"message":"m2","state":"sent","text":"ask again"}    |
      | 6   | text-delta   | a:2     | 2    | {"text":"fresh"}                                      |
      | 7   | text-done    | a:2     | 2    | {"status":"complete","text":"fresh"}                  |

  @profile:stream @req:ADR0052-R-05 @crash @configures
  Scenario: A given-up turn stays given up across the next restart, and its reply made then is never shown
    Given the setting "stream.resumeWaitMs" is 1000
    And barge-in is off
    And alice has started a conversation
    And the model streams "first " "try" to "try it" one piece at a time
    And the model replies "late" to "try it" after a release
    And the model replies "later" to "try it"
    And the model replies "fresh" to "ask again"
    When alice follows the session stream over WebSocket
    And alice sends "try it"
    And alice's WebSocket reader reaches cursor 2
    And the system is killed and restarted
    And alice's WebSocket reader reaches cursor 4
    And the system is killed and restarted
    Then turn 1 is answered "later"
    When 1500 ms pass
    And alice sends "ask again"
    Then turn 2 is answered "fresh"
    And alice's WebSocket reader's frames are exactly:
      | cur | type         | message | turn | data                                                  |
      | 1   | user-message | m1      | 1    | {"message":"m1","state":"sent","text":"try it"}       |
      | 2   | text-delta   | a:1     | 1    | {"text":"first "}                                     |
      | 3   | status       |         | 1    | {"message":"a:1","state":"restarted"}                 |
      | 4   | status       |         | 1    | {"state":"failed","note":"couldn't resume, ask again"} |
      | 5   | user-message | m2      | 2    | {"message":"m2","state":"sent","text":"ask again"}    |
      | 6   | text-delta   | a:2     | 2    | {"text":"fresh"}                                      |
      | 7   | text-done    | a:2     | 2    | {"status":"complete","text":"fresh"}                  |
    And the model was asked for exactly, in order:
      | last user message |
      | try it            |
      | try it            |
      | try it            |
      | ask again         |

  @profile:stream @req:ADR0052-R-05 @crash @configures
  Scenario: A turn that resumes at once, well within its wait, ends as it would with no failed status
    Given the setting "stream.resumeWaitMs" is 3000
    And barge-in is on
    And alice has started a conversation
    And the model streams "first " "try" to "try it" one piece at a time
    And the model replies "second" to "try it"
    When alice follows the session stream over WebSocket
    And alice sends "try it"
    And alice's WebSocket reader reaches cursor 2
    And the system is killed and restarted
    Then turn 1 is answered "second"
    When 3500 ms pass
    Then alice's WebSocket reader's frames are exactly:
      | cur | type         | message | turn | data                                             |
      | 1   | user-message | m1      | 1    | {"message":"m1","state":"sent","text":"try it"}  |
      | 2   | text-delta   | a:1     | 1    | {"text":"first "}                                |
      | 3   | status       |         | 1    | {"message":"a:1","state":"restarted"}            |
      | 4   | text-delta   | a:1     | 1    | {"text":"second"}                                |
      | 5   | text-done    | a:1     | 1    | {"status":"complete","text":"second"}            |

  @profile:stream @req:ADR0052-R-05 @crash
  Scenario: Without a configured wait, a turn that resumes a while after the restart is not given up
    Given alice has started a conversation
    And the model streams "first " "try" to "try it" one piece at a time
    And the model replies "second" to "try it" after a release
    When alice follows the session stream over WebSocket
    And alice sends "try it"
    And alice's WebSocket reader reaches cursor 2
    And the system is killed and restarted
    And alice's WebSocket reader reaches cursor 3
    And 2000 ms pass
    And the model is released
    Then turn 1 is answered "second"
    And alice's WebSocket reader's frames are exactly:
      | cur | type         | message | turn | data                                             |
      | 1   | user-message | m1      | 1    | {"message":"m1","state":"sent","text":"try it"}  |
      | 2   | text-delta   | a:1     | 1    | {"text":"first "}                                |
      | 3   | status       |         | 1    | {"message":"a:1","state":"restarted"}            |
      | 4   | text-delta   | a:1     | 1    | {"text":"second"}                                |
      | 5   | text-done    | a:1     | 1    | {"status":"complete","text":"second"}            |

  @profile:stream @req:ADR0052-S-07 @crash @configures
  Scenario: A message picked up and sent, killed before the conversation recorded it, is answered exactly once after the restart
    Given the setting "conversation.maxWindowTurns" is 1
    And alice has started a conversation
    And the model replies "ok" to "first"
    And the model streams "working" to "second" one piece at a time
    And the model replies "seen" to "third"
    When alice follows the session stream over WebSocket
    And alice steers "first" as "m1"
    Then turn 1 is answered "ok"
    When alice steers "second" as "m2"
    And alice's WebSocket reader reaches cursor 5
    And the summarizer holds its next answer
    And alice steers "third" as "m3"
    And alice's WebSocket reader reaches cursor 6
    And the model goes on after piece 1
    And alice's WebSocket reader reaches cursor 8
    And the summarizer has been asked 1 time
    And the system is killed and restarted
    Then turn 3 is answered "seen"
    And alice's WebSocket reader's frames are exactly:
      | cur | type         | message | turn | data                                              |
      | 1   | user-message | m1      | 1    | {"message":"m1","state":"sent","text":"first"}    |
      | 2   | text-delta   | a:1     | 1    | {"text":"ok"}                                     |
      | 3   | text-done    | a:1     | 1    | {"status":"complete","text":"ok"}                 |
      | 4   | user-message | m2      | 2    | {"message":"m2","state":"sent","text":"second"}   |
      | 5   | text-delta   | a:2     | 2    | {"text":"working"}                                |
      | 6   | user-message | m3      |      | {"message":"m3","state":"queued","text":"third"}  |
      | 7   | text-done    | a:2     | 2    | {"status":"complete","text":"working"}            |
      | 8   | user-message | m3      |      | {"message":"m3","state":"picked-up"}              |
      | 9   | user-message | m3      | 3    | {"message":"m3","state":"sent","text":"third"}    |
      | 10  | text-delta   | a:3     | 3    | {"text":"seen"}                                   |
      | 11  | text-done    | a:3     | 3    | {"status":"complete","text":"seen"}               |
    And the model was asked for exactly, in order:
      | last user message |
      | first             |
      | second            |
      | third             |
    And the history holds:
      | ord | turn | role      | status   | text    |
      | 1   | 1    | user      | accepted | first   |
      | 2   | 1    | assistant | complete | ok      |
      | 3   | 2    | user      | accepted | second  |
      | 4   | 2    | assistant | complete | working |
      | 5   | 3    | user      | accepted | third   |
      | 6   | 3    | assistant | complete | seen    |
