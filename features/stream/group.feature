Feature: The session stream of a chat: terminal lines, tool blocks, retention and group frames
  As a person working in a chat with the assistant and with other people
  I want what I type in the terminal, what tools return and what the room does to be typed frames
  So that every screen draws the same rows and none of them shows a secret or a stale reply

  A line typed in the session's terminal is a term-command frame, redacted, with its typist; a
  line at a password prompt is never logged. A tool's result is a block: a known kind with its
  members, or a short text. A sealed field is only ever its placeholder. In a chat of more than
  one person a terminal, diff or files block says that everyone in the chat sees it. An
  assistant's old deltas are served empty and marked expired. Participants, reactions and pins
  are logged; presence and read markers are ephemeral, and a read marker is its person's alone.

  @profile:stream @req:ADR0052-T-01
  Scenario: A terminal line is logged redacted, with its typist, and never its output
    Given alice has started a conversation
    When alice follows the session stream over WebSocket
    And alice posts to the session's terminal {"line": "psql --password=pw1 -c 'select 1'"}
    Then the session answers exactly 202 {"logged": true, "cur": 1}
    When alice posts to the session's terminal {"line": "export API_KEY=sk-live-42"}
    Then the session answers exactly 202 {"logged": true, "cur": 2}
    When alice posts to the session's terminal {"line": "deploy --token tok-9 --env prod"}
    And alice posts to the session's terminal {"line": "git clone https://deploy:s3cret@example.com/repo.git"}
    And alice posts to the session's terminal {"line": "curl -H Authorization: Bearer abc123 https://example.com"}
    And alice posts to the session's terminal {"line": "make test", "prompt": "shell"}
    Then the session answers exactly 202 {"logged": true, "cur": 6}
    And alice's WebSocket reader got exactly these frames with their data:
      | cur | type         | author       | data                                                                                   |
      | 1   | term-command | person:alice | {"command": "psql --password=[redacted] -c 'select 1'", "via": "terminal"}             |
      | 2   | term-command | person:alice | {"command": "export API_KEY=[redacted]", "via": "terminal"}                            |
      | 3   | term-command | person:alice | {"command": "deploy --token [redacted] --env prod", "via": "terminal"}                 |
      | 4   | term-command | person:alice | {"command": "git clone https://deploy:[redacted]@example.com/repo.git", "via": "terminal"} |
      | 5   | term-command | person:alice | {"command": "curl -H Authorization: Bearer [redacted] https://example.com", "via": "terminal"} |
      | 6   | term-command | person:alice | {"command": "make test", "via": "terminal"}                                            |

  @profile:stream @req:ADR0052-T-01
  Scenario: In a shared chat each line carries the person who typed it
    Given alice has started a shared conversation with bob
    When alice follows the session stream over WebSocket
    And bob posts to the session's terminal {"line": "ls -la"}
    And alice posts to the session's terminal {"line": "git status"}
    Then alice's WebSocket reader got exactly these frames with their data:
      | cur | type         | author       | data                                         |
      | 1   | term-command | person:bob   | {"command": "ls -la", "via": "terminal"}     |
      | 2   | term-command | person:alice | {"command": "git status", "via": "terminal"} |

  @profile:stream @req:ADR0052-T-01
  Scenario: A line typed at a password prompt is not logged, and the head stays where it was
    Given alice has started a conversation
    When alice follows the session stream over WebSocket
    And alice posts to the session's terminal {"line": "sudo apt-get update"}
    Then the session answers exactly 202 {"logged": true, "cur": 1}
    When alice posts to the session's terminal {"line": "hunter2", "prompt": "password"}
    Then the session answers exactly 202 {"logged": false}
    When alice opens the session stream
    Then the open answer says head 1 and floor 1
    When alice posts to the session's terminal {"line": "whoami"}
    Then the session answers exactly 202 {"logged": true, "cur": 2}
    And alice's WebSocket reader got exactly these frames with their data:
      | cur | type         | author       | data                                                  |
      | 1   | term-command | person:alice | {"command": "sudo apt-get update", "via": "terminal"} |
      | 2   | term-command | person:alice | {"command": "whoami", "via": "terminal"}              |

  @profile:stream @req:ADR0052-T-01
  Scenario Outline: A line that is not 1 to 4096 bytes of text without control characters is refused, naming the line
    Given alice has started a conversation
    When alice posts to the session's terminal outside the contract <body>
    Then the session answers exactly 400 {"error": "bad request", "detail": "line"}
    When alice opens the session stream
    Then the open answer says head 0 and floor 1

    Examples:
      | body                           |
      | {"line": ""}                   |
      | {"line": "ls\u000arm -rf /"}   |
      | {"line": "ls\u000d"}           |
      | {"line": "echo \u0007"}        |
      | {"line": "echo \u007f"}        |

  @profile:stream @req:ADR0052-T-01
  Scenario: A line of 4096 bytes or with a tab is logged, one of 4097 bytes is not
    Given alice has started a conversation
    When alice types a line of 4096 bytes in the session's terminal
    Then the session answers exactly 202 {"logged": true, "cur": 1}
    When alice types a line of 4097 bytes in the session's terminal
    Then the session answers exactly 400 {"error": "bad request", "detail": "line"}
    When alice posts to the session's terminal {"line": "ls\t-la"}
    Then the session answers exactly 202 {"logged": true, "cur": 2}

  @profile:stream @req:ADR0052-B-01
  Scenario: A tool call of a live turn is started, then finished with its block, between the message and the reply
    Given the tool "shell" answers {"block": {"kind": "terminal", "command": "ls", "output": "a.go\n", "exit": 0, "cwd": "/srv"}}
    And alice has started a conversation
    And the model calls "shell" with {"cmd": "ls"}
    And the model replies "Listed."
    # A one-word reply streams as one piece, so its delta frames do not depend on timing.
    When alice follows the session stream over WebSocket
    And alice sends "what is here?"
    Then alice's WebSocket reader got exactly these frames with their data:
      | cur | type          | message | data                                                                                                   |
      | 1   | user-message  | m1      | {"message": "m1", "state": "sent", "text": "what is here?"}                                           |
      | 2   | tool-started  |         | {"call": "call_1", "tool": "shell"}                                                                    |
      | 3   | tool-finished |         | {"call": "call_1", "tool": "shell", "ok": true, "block": {"kind": "terminal", "command": "ls", "output": "a.go\n", "exit": 0}} |
      | 4   | text-delta    | a:1     | {"text": "Listed."}                                                                         |
      | 5   | text-done     | a:1     | {"status": "complete", "text": "Listed."}                                                  |

  @profile:stream @req:ADR0052-B-01
  Scenario Outline: A result with a known block kind and its members is that block, keeping only its members
    Given the tool "work" answers <result>
    And alice has started a conversation
    And the model calls "work" with {}
    And the model replies "Done."
    When alice follows the session stream over WebSocket
    And alice sends "go"
    Then alice's WebSocket reader got for call "call_1" exactly the block:
      """
      <block>
      """

    Examples:
      | result                                                                                              | block                                                                       |
      | {"block": {"kind": "diff", "path": "a.go", "patch": "@@ -1 +1 @@ -a +b", "lines": 2}}               | {"kind": "diff", "path": "a.go", "patch": "@@ -1 +1 @@ -a +b"}              |
      | {"block": {"kind": "files", "paths": ["a.go", "b.go"], "detail": "2 found"}, "other": true}         | {"kind": "files", "paths": ["a.go", "b.go"], "detail": "2 found"}           |
      | {"block": {"kind": "task", "id": "T-7", "title": "Fix the pump", "state": "open", "owner": "bob"}}  | {"kind": "task", "id": "T-7", "title": "Fix the pump", "state": "open"}     |
      | {"block": {"kind": "draft", "body": "Hello", "to": "ops@example.com"}}                              | {"kind": "draft", "body": "Hello", "to": "ops@example.com"}                 |
      | {"block": {"kind": "flow-change", "flow": "deploy", "change": "paused"}}                            | {"kind": "flow-change", "flow": "deploy", "change": "paused"}               |
      | {"block": {"kind": "answer", "text": "42"}}                                                         | {"kind": "answer", "text": "42"}                                            |
      | {"block": {"kind": "screen", "title": "Pumps", "text": "all green"}}                                | {"kind": "screen", "title": "Pumps", "text": "all green"}                   |
      | {"block": {"kind": "record", "type": "contact", "fields": {"name": "Ann"}}}                         | {"kind": "record", "type": "contact", "fields": {"name": "Ann"}}            |
      | {"block": {"kind": "text", "text": "plain"}}                                                        | {"kind": "text", "text": "plain"}                                           |
      | {"block": {"kind": "terminal", "command": "ls", "output": "", "exit": 0}}                           | {"kind": "terminal", "command": "ls", "output": "", "exit": 0}              |
      | "just words"                                                                                        | {"kind": "text", "text": "just words"}                                      |
      | {"block": {"kind": "chart", "title": "x"}}                                                          | {"kind": "text", "text": "{\"block\":{\"kind\":\"chart\",\"title\":\"x\"}}"} |
      | {"block": {"kind": "terminal", "command": "ls", "output": "a"}}                                     | {"kind": "text", "text": "{\"block\":{\"command\":\"ls\",\"kind\":\"terminal\",\"output\":\"a\"}}"} |
      | {"block": {"kind": "terminal", "command": "ls", "output": "a", "exit": "0"}}                        | {"kind": "text", "text": "{\"block\":{\"command\":\"ls\",\"exit\":\"0\",\"kind\":\"terminal\",\"output\":\"a\"}}"} |

  @profile:stream @req:ADR0052-B-01
  Scenario Outline: A result with no block is a text block of at most 280 characters, an ellipsis added when cut
    Given the tool "notes" gives a text of <n> characters as its answer
    And alice has started a conversation
    And the model calls "notes" with {}
    And the model replies "Read."
    When alice follows the session stream over WebSocket
    And alice sends "read the notes"
    Then alice's WebSocket reader got for call "call_1" the text of "notes" as a text block cut at 280 characters

    Examples:
      | n   |
      | 279 |
      | 280 |
      | 281 |
      | 600 |

  @profile:stream @req:ADR0052-B-02
  Scenario Outline: A sealed field is only ever its placeholder, never its value or its reference
    Given the tool "vault" answers <result>
    And alice has started a conversation
    And the model calls "vault" with {}
    And the model replies "Done."
    When alice follows the session stream over WebSocket
    And alice sends "go"
    Then alice's WebSocket reader got for call "call_1" exactly the block:
      """
      <block>
      """

    Examples:
      | result                                                                                                                           | block                                                                                                               |
      | {"block": {"kind": "answer", "text": {"sealed": true, "class": "secret", "value": "hunter2"}}}                                   | {"kind": "answer", "text": {"sealed": true, "class": "secret", "present": true}}                                    |
      | {"block": {"kind": "draft", "body": "Call me", "to": {"sealed": true, "class": "pii", "ref": "vault://c/7"}}}                    | {"kind": "draft", "body": "Call me", "to": {"sealed": true, "class": "pii", "present": true}}                       |
      | {"block": {"kind": "draft", "body": "Hi", "subject": {"sealed": true, "class": "pii", "value": null}}}                           | {"kind": "draft", "body": "Hi", "subject": {"sealed": true, "class": "pii", "present": false}}                      |
      | {"block": {"kind": "record", "type": "contact", "fields": {"phone": {"sealed": true, "class": "pii", "value": "555-0100"}}}}     | {"kind": "record", "type": "contact", "fields": {"phone": {"sealed": true, "class": "pii", "present": true}}}      |
      | {"block": {"kind": "record", "type": "account", "fields": {"keys": [{"sealed": true, "class": "key", "ref": "kms://a"}]}}}       | {"kind": "record", "type": "account", "fields": {"keys": [{"sealed": true, "class": "key", "present": true}]}}     |

  @profile:stream @req:ADR0052-B-03
  Scenario: In a chat of one no block carries the shared note
    Given the tool "shell" answers {"block": {"kind": "terminal", "command": "ls", "output": "a.go\n", "exit": 0}}
    And the tool "search" answers {"block": {"kind": "files", "paths": ["a.go"], "note": "1 match"}}
    And alice has started a conversation
    And the model calls "shell" with {}
    And the model calls "search" with {}
    And the model replies "Done."
    When alice follows the session stream over WebSocket
    And alice sends "look around"
    Then alice's WebSocket reader got for call "call_1" exactly the block:
      """
      {"kind": "terminal", "command": "ls", "output": "a.go\n", "exit": 0}
      """
    And alice's WebSocket reader got for call "call_2" exactly the block:
      """
      {"kind": "files", "paths": ["a.go"], "note": "1 match"}
      """

  @profile:stream @req:ADR0052-B-03
  Scenario: In a chat of two a terminal, diff or files block says everyone in the chat sees it, and no other kind does
    Given the tool "shell" answers {"block": {"kind": "terminal", "command": "ls", "output": "a.go\n", "exit": 0}}
    And the tool "patch" answers {"block": {"kind": "diff", "path": "a.go", "patch": "-a\n+b", "note": "mine"}}
    And the tool "search" answers {"block": {"kind": "files", "paths": ["a.go"], "note": "1 match"}}
    And the tool "find" answers {"block": {"kind": "files", "paths": ["b.go"], "detail": "in src", "note": "1 match"}}
    And the tool "tasks" answers {"block": {"kind": "task", "id": "T-1", "title": "Fix", "state": "open"}}
    And alice has started a shared conversation with bob
    And the model calls "shell" with {}
    And the model calls "patch" with {}
    And the model calls "search" with {}
    And the model calls "find" with {}
    And the model calls "tasks" with {}
    And the model replies "Done."
    When alice follows the session stream over WebSocket
    And alice sends "look around"
    Then alice's WebSocket reader got for call "call_1" exactly the block:
      """
      {"kind": "terminal", "command": "ls", "output": "a.go\n", "exit": 0, "note": "visible to everyone in this chat"}
      """
    And alice's WebSocket reader got for call "call_2" exactly the block:
      """
      {"kind": "diff", "path": "a.go", "patch": "-a\n+b", "note": "visible to everyone in this chat"}
      """
    And alice's WebSocket reader got for call "call_3" exactly the block:
      """
      {"kind": "files", "paths": ["a.go"], "detail": "1 match", "note": "visible to everyone in this chat"}
      """
    And alice's WebSocket reader got for call "call_4" exactly the block:
      """
      {"kind": "files", "paths": ["b.go"], "detail": "in src; 1 match", "note": "visible to everyone in this chat"}
      """
    And alice's WebSocket reader got for call "call_5" exactly the block:
      """
      {"kind": "task", "id": "T-1", "title": "Fix", "state": "open"}
      """

  @profile:stream @req:ADR0052-E-01 @configures
  Scenario: Past stream.retainMs an assistant's deltas are served empty and expired, everything else whole
    Given the setting "stream.retainMs" is 1000
    And the tool "shell" answers {"block": {"kind": "terminal", "command": "ls", "output": "a.go\n", "exit": 0}}
    And alice has started a conversation
    And the model calls "shell" with {}
    And the model replies "Done."
    And the model streams "Pumps " "are fine" to "check the pumps" one piece at a time
    When alice follows the session stream over WebSocket
    And alice posts to the session's terminal {"line": "make test"}
    And alice sends "run it"
    And alice's WebSocket reader reaches cursor 6
    And alice sends "check the pumps"
    And alice's WebSocket reader reaches cursor 8
    And the model goes on after piece 1
    And alice's WebSocket reader reaches cursor 9
    And the model goes on after piece 2
    Then alice's WebSocket reader got exactly these frames with their data:
      | cur | type          | data                                                                                                   | expired |
      | 1   | term-command  | {"command": "make test", "via": "terminal"}                                                           |         |
      | 2   | user-message  | {"message": "m1", "state": "sent", "text": "run it"}                                                  |         |
      | 3   | tool-started  | {"call": "call_1", "tool": "shell"}                                                                    |         |
      | 4   | tool-finished | {"call": "call_1", "tool": "shell", "ok": true, "block": {"kind": "terminal", "command": "ls", "output": "a.go\n", "exit": 0}} |         |
      | 5   | text-delta    | {"text": "Done."}                                                                                      |         |
      | 6   | text-done     | {"status": "complete", "text": "Done."}                                                               |         |
      | 7   | user-message  | {"message": "m2", "state": "sent", "text": "check the pumps"}                                         |         |
      | 8   | text-delta    | {"text": "Pumps "}                                                                                     |         |
      | 9   | text-delta    | {"text": "are fine"}                                                                                   |         |
      | 10  | text-done     | {"status": "complete", "text": "Pumps are fine"}                                                      |         |
    When 1500 ms pass
    And alice reads the session stream over SSE from 0
    Then alice's SSE reader got exactly these frames with their data:
      | cur | span | type          | data                                                                                                   | expired |
      | 1   |      | term-command  | {"command": "make test", "via": "terminal"}                                                           |         |
      | 2   |      | user-message  | {"message": "m1", "state": "sent", "text": "run it"}                                                  |         |
      | 3   |      | tool-started  | {"call": "call_1", "tool": "shell"}                                                                    |         |
      | 4   |      | tool-finished | {"call": "call_1", "tool": "shell", "ok": true, "block": {"kind": "terminal", "command": "ls", "output": "a.go\n", "exit": 0}} |         |
      | 5   |      | text-delta    | {}                                                                                                     | true    |
      | 6   |      | text-done     | {"status": "complete", "text": "Done."}                                                               |         |
      | 7   |      | user-message  | {"message": "m2", "state": "sent", "text": "check the pumps"}                                         |         |
      | 9   | 2    | text-delta    | {"parts": ["", ""]}                                                                                    | true    |
      | 10  |      | text-done     | {"status": "complete", "text": "Pumps are fine"}                                                      |         |
    When alice reads the session stream over WebSocket from 8 holding cursor 8
    Then alice's WebSocket reader got exactly these frames with their data:
      | cur | span | type       | data                                             | expired |
      | 9   |      | text-delta | {}                                               | true    |
      | 10  |      | text-done  | {"status": "complete", "text": "Pumps are fine"} |         |

  @profile:stream @req:ADR0052-E-01 @configures
  Scenario: Within stream.retainMs a replay serves the deltas whole
    Given the setting "stream.retainMs" is 8000
    And alice has started a conversation
    And the model streams "Pumps " "are fine" to "check the pumps" one piece at a time
    When alice follows the session stream over WebSocket
    And alice sends "check the pumps"
    And alice's WebSocket reader reaches cursor 2
    And the model goes on after piece 1
    And alice's WebSocket reader reaches cursor 3
    And the model goes on after piece 2
    And alice's WebSocket reader reaches cursor 4
    When 1500 ms pass
    And alice reads the session stream over SSE from 0
    Then alice's SSE reader got exactly these frames with their data:
      | cur | span | type         | data                                                          | expired |
      | 1   |      | user-message | {"message": "m1", "state": "sent", "text": "check the pumps"} |         |
      | 3   | 2    | text-delta   | {"parts": ["Pumps ", "are fine"]}                             |         |
      | 4   |      | text-done    | {"status": "complete", "text": "Pumps are fine"}              |         |

  @profile:stream @req:ADR0052-G-01
  Scenario: Adding and removing participants is logged as joined and left, with who made the change
    Given alice has started a shared conversation with bob
    When alice follows the session stream over WebSocket
    And alice adds carol to the participants
    And alice adds dave to the participants
    And alice removes bob from the participants
    Then alice's WebSocket reader got exactly these frames with their data:
      | cur | type               | author       | data                                         |
      | 1   | participant-joined | person:alice | {"who": "person:carol", "by": "person:alice"} |
      | 2   | participant-joined | person:alice | {"who": "person:dave", "by": "person:alice"}  |
      | 3   | participant-left   | person:alice | {"who": "person:bob", "by": "person:alice"}   |

  @profile:stream @req:ADR0052-G-02
  Scenario: Reactions and pins are logged with their author, of a message the log holds
    Given alice has started a shared conversation with bob
    And the model replies "Pumps are fine" to "check the pumps"
    When alice sends "check the pumps"
    And turn 1 is answered "Pumps are fine"
    And alice follows the session stream over WebSocket
    Then alice's WebSocket reader got exactly these frames with their data:
      | cur | type         | author       | message | data                                                            |
      | 1   | user-message | person:alice | u:1     | {"message": "u:1", "state": "sent", "text": "check the pumps"} |
      | 2   | text-delta   |              | a:1     | {"text": "Pumps are fine"}                                      |
      | 3   | text-done    |              | a:1     | {"status": "complete", "text": "Pumps are fine"}                |
    When bob posts to the session's reactions {"message": "u:1", "emoji": "👍"}
    Then the session answers exactly 202 {"cur": 4}
    When alice posts to the session's reactions {"message": "a:1", "emoji": "👍👍👍👍👍👍👍👍👍👍👍👍👍👍👍👍", "on": false}
    Then the session answers exactly 202 {"cur": 5}
    When bob posts to the session's pins {"message": "a:1"}
    Then the session answers exactly 202 {"cur": 6}
    When alice posts to the session's pins {"message": "a:1", "on": false}
    Then the session answers exactly 202 {"cur": 7}
    And alice's WebSocket reader got exactly these frames with their data:
      | cur | type         | author       | message | data                                                                   |
      | 1   | user-message | person:alice | u:1     | {"message": "u:1", "state": "sent", "text": "check the pumps"}        |
      | 2   | text-delta   |              | a:1     | {"text": "Pumps are fine"}                                             |
      | 3   | text-done    |              | a:1     | {"status": "complete", "text": "Pumps are fine"}                       |
      | 4   | reaction     | person:bob   | u:1     | {"message": "u:1", "emoji": "👍", "on": true}                          |
      | 5   | reaction     | person:alice | a:1     | {"message": "a:1", "emoji": "👍👍👍👍👍👍👍👍👍👍👍👍👍👍👍👍", "on": false} |
      | 6   | pin          | person:bob   | a:1     | {"message": "a:1", "on": true}                                         |
      | 7   | pin          | person:alice | a:1     | {"message": "a:1", "on": false}                                        |

  @profile:stream @req:ADR0052-G-02
  Scenario Outline: A reaction or pin of a message the log does not hold, or with a bad emoji, is refused and logs nothing
    Given alice has started a conversation
    And the model replies "Pumps are fine" to "check the pumps"
    When alice sends "check the pumps"
    And turn 1 is answered "Pumps are fine"
    And alice posts to the session's <route> outside the contract <body>
    Then the session answers exactly 400 {"error": "bad request", "detail": "<detail>"}
    When alice opens the session stream
    Then the open answer says head 3 and floor 1

    Examples:
      | route     | body                                                       | detail  |
      | reactions | {"message": "m9", "emoji": "👍"}                           | message |
      | reactions | {"message": "a:2", "emoji": "👍"}                          | message |
      | pins      | {"message": "m9"}                                          | message |
      | reactions | {"message": "m1", "emoji": ""}                             | emoji   |
      | reactions | {"message": "m1", "emoji": "👍👍👍👍👍👍👍👍👍👍👍👍👍👍👍👍👍"} | emoji   |

  @profile:stream @req:ADR0052-G-02
  Scenario Outline: A reaction or pin names one message exactly: <what> is refused naming message, and nothing is logged
    Given alice has started a conversation
    And the model replies "fine" to "check the pumps"
    When alice posts to the session's terminal {"line": "make test"}
    And alice steers "check the pumps" as "m12"
    And turn 1 is answered "fine"
    # The turn's last frame may be logged after its reply reaches the history: wait for it.
    And alice follows the session stream over WebSocket
    And alice's WebSocket reader reaches cursor 4
    And alice posts to the session's <route> outside the contract <body>
    Then the session answers exactly 400 {"error": "bad request", "detail": "message"}
    When alice opens the session stream
    Then the open answer says head 4 and floor 1

    Examples:
      | what                            | route     | body                              |
      | an empty message (a reaction)   | reactions | {"message": "", "emoji": "👍"}    |
      | an empty message (a pin)        | pins      | {"message": ""}                   |
      | a prefix of a person's message  | reactions | {"message": "m1", "emoji": "👍"}  |
      | a prefix of a reply's message   | pins      | {"message": "a:"}                 |

  @profile:stream @req:ADR0052-G-03
  Scenario: Presence reaches every reader with cursor 0, is never logged, and one author's is dropped within 3 seconds
    Given alice has started a shared conversation with bob
    When alice follows the session stream over WebSocket
    And bob follows the session stream over WebSocket
    And alice posts to the session's terminal {"line": "make test"}
    And alice's WebSocket reader reaches cursor 1
    And bob's WebSocket reader reaches cursor 1
    And alice posts to the session's presence {"state": "typing"}
    Then the session answers exactly 202 {"sent": true}
    When alice posts to the session's presence {"state": "doing", "doing": "reading the logs"}
    Then the session answers exactly 202 {"sent": false}
    When bob posts to the session's presence {"state": "doing", "doing": "reading the logs"}
    Then the session answers exactly 202 {"sent": true}
    When 2000 ms pass
    And alice posts to the session's presence {"state": "typing"}
    Then the session answers exactly 202 {"sent": false}
    When 1200 ms pass
    And alice posts to the session's presence {"state": "doing", "doing": "running tests"}
    Then the session answers exactly 202 {"sent": true}
    And alice's WebSocket reader got exactly these frames with their data:
      | cur | type         | author       | data                                                            |
      | 1   | term-command | person:alice | {"command": "make test", "via": "terminal"}                     |
      | 0   | presence     | person:alice | {"who": "person:alice", "state": "typing"}                      |
      | 0   | presence     | person:bob   | {"who": "person:bob", "state": "doing", "doing": "reading the logs"} |
      | 0   | presence     | person:alice | {"who": "person:alice", "state": "doing", "doing": "running tests"}  |
    And bob's WebSocket reader got exactly these frames with their data:
      | cur | type         | author       | data                                                            |
      | 1   | term-command | person:alice | {"command": "make test", "via": "terminal"}                     |
      | 0   | presence     | person:alice | {"who": "person:alice", "state": "typing"}                      |
      | 0   | presence     | person:bob   | {"who": "person:bob", "state": "doing", "doing": "reading the logs"} |
      | 0   | presence     | person:alice | {"who": "person:alice", "state": "doing", "doing": "running tests"}  |
    When alice opens the session stream
    Then the open answer says head 1 and floor 1
    When alice reads the session stream over SSE from 0
    Then alice's SSE reader got exactly these frames with their data:
      | cur | type         | author       | data                                        |
      | 1   | term-command | person:alice | {"command": "make test", "via": "terminal"} |

  @profile:stream @req:ADR0052-G-04
  Scenario: A read marker only moves forward and goes to its person's own readers alone, a new one after its replay
    Given alice has started a shared conversation with bob
    And alice posts to the session's terminal {"line": "make test"}
    And bob posts to the session's terminal {"line": "make lint"}
    And alice posts to the session's terminal {"line": "make vet"}
    When alice follows the session stream over WebSocket
    And bob follows the session stream over WebSocket
    And alice's WebSocket reader reaches cursor 3
    And bob's WebSocket reader reaches cursor 3
    And alice posts to the session's read {"upto": 2}
    Then the session answers exactly 200 {"upto": 2}
    When alice posts to the session's read {"upto": 1}
    Then the session answers exactly 200 {"upto": 2}
    When alice posts to the session's read {"upto": 4}
    Then the session answers exactly 400 {"error": "bad request", "detail": "upto"}
    When alice posts to the session's read {"upto": 3}
    Then the session answers exactly 200 {"upto": 3}
    And alice's WebSocket reader got exactly these frames with their data:
      | cur | type         | author       | data                                        |
      | 1   | term-command | person:alice | {"command": "make test", "via": "terminal"} |
      | 2   | term-command | person:bob   | {"command": "make lint", "via": "terminal"} |
      | 3   | term-command | person:alice | {"command": "make vet", "via": "terminal"}  |
      | 0   | read-marker  | person:alice | {"upto": 2}                                 |
      | 0   | read-marker  | person:alice | {"upto": 3}                                 |
    And bob's WebSocket reader got exactly these frames with their data:
      | cur | type         | author       | data                                        |
      | 1   | term-command | person:alice | {"command": "make test", "via": "terminal"} |
      | 2   | term-command | person:bob   | {"command": "make lint", "via": "terminal"} |
      | 3   | term-command | person:alice | {"command": "make vet", "via": "terminal"}  |
    When alice reads the session stream over SSE from 1
    Then alice's SSE reader got exactly these frames with their data:
      | cur | type         | author       | data                                        |
      | 2   | term-command | person:bob   | {"command": "make lint", "via": "terminal"} |
      | 3   | term-command | person:alice | {"command": "make vet", "via": "terminal"}  |
      | 0   | read-marker  | person:alice | {"upto": 3}                                 |
    When bob reads the session stream over SSE from 0
    Then bob's SSE reader got exactly these frames with their data:
      | cur | type         | author       | data                                        |
      | 1   | term-command | person:alice | {"command": "make test", "via": "terminal"} |
      | 2   | term-command | person:bob   | {"command": "make lint", "via": "terminal"} |
      | 3   | term-command | person:alice | {"command": "make vet", "via": "terminal"}  |
    When bob posts to the session's read {"upto": 1}
    Then the session answers exactly 200 {"upto": 1}
    And bob's SSE reader got exactly these frames with their data:
      | cur | type         | author       | data                                        |
      | 1   | term-command | person:alice | {"command": "make test", "via": "terminal"} |
      | 2   | term-command | person:bob   | {"command": "make lint", "via": "terminal"} |
      | 3   | term-command | person:alice | {"command": "make vet", "via": "terminal"}  |
      | 0   | read-marker  | person:bob   | {"upto": 1}                                 |
    And alice's SSE reader got exactly these frames with their data:
      | cur | type         | author       | data                                        |
      | 2   | term-command | person:bob   | {"command": "make lint", "via": "terminal"} |
      | 3   | term-command | person:alice | {"command": "make vet", "via": "terminal"}  |
      | 0   | read-marker  | person:alice | {"upto": 3}                                 |

  @profile:stream @req:ADR0052-G-09
  Scenario: A removed participant's open session streams end at once with reason removed, and nothing sent after reaches them
    Given alice has started a shared conversation with bob
    And alice posts to the session's terminal {"line": "make test"}
    When alice follows the session stream over WebSocket
    And bob follows the session stream over WebSocket
    And bob follows the session stream over SSE
    And bob's WebSocket reader reaches cursor 1
    And bob's SSE reader reaches cursor 1
    And alice removes bob from the participants
    And alice posts to the session's terminal {"line": "make vet"}
    And alice's WebSocket reader reaches cursor 3
    Then alice's WebSocket reader got exactly these frames with their data:
      | cur | type              | author       | data                                        |
      | 1   | term-command      | person:alice | {"command": "make test", "via": "terminal"} |
      | 2   | participant-left  | person:alice | {"who": "person:bob", "by": "person:alice"} |
      | 3   | term-command      | person:alice | {"command": "make vet", "via": "terminal"}  |
    And bob's WebSocket reader got exactly these frames with their data:
      | cur | type              | author       | data                                        |
      | 1   | term-command      | person:alice | {"command": "make test", "via": "terminal"} |
      | 2   | participant-left  | person:alice | {"who": "person:bob", "by": "person:alice"} |
      | 0   | end               |              | {"reason": "removed"}                       |
    And bob's SSE reader got exactly these frames with their data:
      | cur | type              | author       | data                                        |
      | 1   | term-command      | person:alice | {"command": "make test", "via": "terminal"} |
      | 2   | participant-left  | person:alice | {"who": "person:bob", "by": "person:alice"} |
      | 0   | end               |              | {"reason": "removed"}                       |

  @profile:stream @req:ADR0052-G-10
  Scenario: Two people of one actor name in two tenants are two people in the room, each named apart
    # name(<principal>) is the name the kit computes for the principal in this chat (spec/stream.md,
    # Group chats: person:<actor> for one of the owner's tenant acting for no one, else the
    # identity key).
    Given alice has started a shared conversation with bob
    And the model replies "Pumps are fine" to "check the pumps"
    And the model replies "Shut" to "check the valves"
    When alice sends "check the pumps"
    And turn 1 is answered "Pumps are fine"
    And alice adds alice at globex to the participants
    And alice at globex posts to the session's terminal {"line": "make test"}
    And alice posts to the session's terminal {"line": "make vet"}
    And alice at globex reads the session stream over SSE from 0
    Then alice at globex's SSE reader got exactly these frames with their data:
      | cur | type               | author                | acts_for    | message | data                                                                   |
      | 1   | user-message       | name(alice)           |             | u:1     | {"message": "u:1", "state": "sent", "text": "check the pumps"}        |
      | 2   | hidden             |                       |             |         | {}                                                                     |
      | 3   | hidden             |                       |             |         | {}                                                                     |
      | 4   | participant-joined | name(alice)           |             |         | {"who": "name(alice at globex)", "by": "name(alice)"}                  |
      | 5   | term-command       | name(alice at globex) |             |         | {"command": "make test", "via": "terminal"}                            |
      | 6   | term-command       | name(alice)           |             |         | {"command": "make vet", "via": "terminal"}                             |
    When alice removes alice at globex from the participants
    And alice sends "check the valves"
    And turn 2 is answered "Shut"
    And alice reads the session stream over SSE from 0
    Then alice's SSE reader got exactly these frames with their data:
      | cur | type               | author                | acts_for    | message | data                                                                   |
      | 1   | user-message       | name(alice)           |             | u:1     | {"message": "u:1", "state": "sent", "text": "check the pumps"}        |
      | 2   | text-delta         |                       | name(alice) | a:1     | {"text": "Pumps are fine"}                                             |
      | 3   | text-done          |                       | name(alice) | a:1     | {"status": "complete", "text": "Pumps are fine"}                       |
      | 4   | participant-joined | name(alice)           |             |         | {"who": "name(alice at globex)", "by": "name(alice)"}                  |
      | 5   | term-command       | name(alice at globex) |             |         | {"command": "make test", "via": "terminal"}                            |
      | 6   | term-command       | name(alice)           |             |         | {"command": "make vet", "via": "terminal"}                             |
      | 7   | participant-left   | name(alice)           |             |         | {"who": "name(alice at globex)", "by": "name(alice)"}                  |
      | 8   | user-message       | name(alice)           |             | u:3     | {"message": "u:3", "state": "sent", "text": "check the valves"}       |
      | 9   | text-delta         |                       | name(alice) | a:2     | {"text": "Shut"}                                                       |
      | 10  | text-done          |                       | name(alice) | a:2     | {"status": "complete", "text": "Shut"}                                 |

  @profile:stream @req:ADR0052-G-10
  Scenario: Removing one of two people who share an actor name ends that person's open streams alone
    Given alice has started a shared conversation with bob
    When alice adds alice at globex to the participants
    And alice follows the session stream over WebSocket
    And alice at globex follows the session stream over WebSocket
    And alice's WebSocket reader reaches cursor 1
    And alice at globex's WebSocket reader reaches cursor 1
    And alice removes alice at globex from the participants
    And alice posts to the session's terminal {"line": "make vet"}
    And alice's WebSocket reader reaches cursor 3
    Then alice's WebSocket reader got exactly these frames with their data:
      | cur | type               | author      | data                                                   |
      | 1   | participant-joined | name(alice) | {"who": "name(alice at globex)", "by": "name(alice)"}  |
      | 2   | participant-left   | name(alice) | {"who": "name(alice at globex)", "by": "name(alice)"}  |
      | 3   | term-command       | name(alice) | {"command": "make vet", "via": "terminal"}             |
    And alice at globex's WebSocket reader got exactly these frames with their data:
      | cur | type               | author      | data                                                   |
      | 1   | participant-joined | name(alice) | {"who": "name(alice at globex)", "by": "name(alice)"}  |
      | 2   | participant-left   | name(alice) | {"who": "name(alice at globex)", "by": "name(alice)"}  |
      | 0   | end                |             | {"reason": "removed"}                                  |

  @profile:stream @req:ADR0052-G-10
  Scenario: A turn's live text goes to its asker alone, not to another tenant's person of the same actor name
    Given alice has started a shared conversation with bob
    And the model streams "Checking" to "check the pumps" and waits
    When alice adds alice at globex to the participants
    And alice at globex follows the session stream over WebSocket
    And alice sends "check the pumps"
    And the model has streamed its first words
    And alice at globex's WebSocket reader reaches cursor 3
    And the model is released
    Then turn 1 is answered "Checking"
    And alice at globex's WebSocket reader got exactly these frames with their data:
      | cur | type               | author      | acts_for    | message | data                                                           |
      | 1   | participant-joined | name(alice) |             |         | {"who": "name(alice at globex)", "by": "name(alice)"}          |
      | 2   | user-message       | name(alice) |             | u:1     | {"message": "u:1", "state": "sent", "text": "check the pumps"} |
      | 3   | hidden             |             |             |         | {}                                                             |
      | 4   | text-done          |             | name(alice) | a:1     | {"status": "complete", "text": "Checking"}                     |
