Feature: One caller's bounds on the session stream, and what a terminal line never shows
  As the operator of a system many people stream from
  I want each caller held to a share of the tickets and of the streams kept in memory
  So that one caller cannot make every other caller wait, and a secret typed in a terminal never reaches a screen

  A caller may have only so many tickets waiting (made, not yet presented, not expired) and may
  hold only so many sessions' streams at once (by a ticket waiting or a connection reading); past
  either, an open is refused with 429 and its typed reason, and any other caller is untouched.
  A terminal line is logged with every credential form spec/stream.md lists replaced by
  "[redacted]", and ordinary text that only looks like one is logged as typed.

  @profile:stream @req:ADR0052-L-01 @configures
  Scenario: A caller with as many tickets waiting as the cap gets no other, and another caller still does
    Given the setting "stream.principalTickets" is 2
    And alice has started a conversation "A"
    And bob has started a conversation "B"
    When alice opens the session stream of conversation "A"
    And alice opens the session stream of conversation "A"
    And alice asks to open the session stream of conversation "A"
    Then the session answers exactly 429 {"error": "too many requests", "reason": "tickets"}
    When alice presents the ticket over WebSocket for conversation "A" and is served
    And alice opens the session stream of conversation "A"
    And alice asks to open the session stream of conversation "A"
    Then the session answers exactly 429 {"error": "too many requests", "reason": "tickets"}
    When bob opens the session stream of conversation "B"
    Then bob presents the ticket over WebSocket for conversation "B" and is served

  @profile:stream @req:ADR0052-L-01 @configures
  Scenario: A ticket someone else presented no longer counts against the caller it was made for
    # The presentation spends the ticket whoever shows it, so its caller has none waiting again.
    Given the setting "stream.principalTickets" is 1
    And alice has started a shared conversation with bob
    When alice opens the session stream
    And alice asks to open the session stream
    Then the session answers exactly 429 {"error": "too many requests", "reason": "tickets"}
    When bob presents the ticket over WebSocket and is refused as "caller"
    Then alice opens the session stream
    And alice presents the ticket over WebSocket and is served

  @profile:stream @req:ADR0052-L-02 @configures
  Scenario: A caller holds as many sessions' streams as its share allows, and another caller is not affected
    Given the setting "stream.maxBytes" is 4096
    And the setting "stream.principalResidentBytes" is 8192
    And bob has started a conversation "D"
    And alice has started a conversation "A"
    When alice follows the session stream over WebSocket
    And alice has started a conversation "B"
    And alice follows the session stream over SSE
    And alice has started a conversation "C"
    And alice asks to open the session stream of conversation "C"
    Then the session answers exactly 429 {"error": "too many requests", "reason": "resident"}
    When alice opens the session stream of conversation "A"
    And bob opens the session stream of conversation "D"
    Then bob presents the ticket over WebSocket for conversation "D" and is served

  @profile:stream @req:ADR0052-L-02 @configures
  Scenario: A reader that stops lets go of its session, so the caller's share has room again
    # A share of 4096 bytes with logs of 4096 holds one session: B is refused while A's reader
    # reads, and opens once it has stopped.
    Given the setting "stream.maxBytes" is 4096
    And the setting "stream.principalResidentBytes" is 4096
    And alice has started a conversation "A"
    When alice follows the session stream over WebSocket
    And alice has started a conversation "B"
    And alice asks to open the session stream of conversation "B"
    Then the session answers exactly 429 {"error": "too many requests", "reason": "resident"}
    When alice's WebSocket reader stops
    Then alice opens the session stream of conversation "B" once her stopped reader no longer holds its session

  @profile:stream @req:ADR0052-T-02
  Scenario: Every credential form the spec lists is redacted, and ordinary text that looks like one is kept
    Given alice has started a conversation
    When alice follows the session stream over WebSocket
    Then each line alice types in the session's terminal reaches alice's WebSocket reader as exactly its command:
      | line                                                                                 | command                                                                  |
      | mysql -u root -phunter2 shop                                                         | mysql -u root -p[redacted] shop                                          |
      | mysql -u root -p shop                                                                | mysql -u root -p shop                                                    |
      | mkdir -pv /tmp/build                                                                 | mkdir -pv /tmp/build                                                     |
      | curl -u alice:hunter2 https://example.com/api                                        | curl -u alice:[redacted] https://example.com/api                         |
      | curl --user alice:hunter2 https://example.com/api                                    | curl --user alice:[redacted] https://example.com/api                     |
      | curl -u alice https://example.com/api                                                | curl -u alice https://example.com/api                                    |
      | docker run -u 1000:1000 alpine id                                                    | docker run -u 1000:1000 alpine id                                        |
      | git clone https://ghp0abcdefghijklmnop12@github.com/o/r.git                          | git clone https://[redacted]@github.com/o/r.git                          |
      | git clone https://alice@example.com/r.git                                            | git clone https://alice@example.com/r.git                                |
      | git clone ssh://git@example.com/r.git                                                | git clone ssh://git@example.com/r.git                                    |
      | git clone https://deploy:s3cret@example.com/r.git                                    | git clone https://deploy:[redacted]@example.com/r.git                    |
      | echo '{"user": "bob", "password": "hunter2"}' > creds.json                           | echo '{"user": "bob", "password": "[redacted]"}' > creds.json            |
      | echo '{"user": "bob", "note": "password reset"}'                                     | echo '{"user": "bob", "note": "password reset"}'                         |
      | docker login -u bob -p hunter2 registry.example.com                                  | docker login -u bob -p [redacted] registry.example.com                   |
      | docker run -p 8080:80 nginx                                                          | docker run -p 8080:80 nginx                                              |
      | sshpass -p hunter2 ssh bob@example.com                                               | sshpass -p [redacted] ssh bob@example.com                                |
      | ssh -p 2222 bob@example.com                                                          | ssh -p 2222 bob@example.com                                              |
      | mysql --password=hunter2 shop                                                        | mysql --password=[redacted] shop                                         |
      | deploy --client-secret 'two words' --env prod                                        | deploy --client-secret [redacted] --env prod                             |
      | git push -u origin main                                                              | git push -u origin main                                                  |
      | curl -H 'Authorization: Bearer abc.def' https://example.com                          | curl -H 'Authorization: Bearer [redacted]' https://example.com           |
      | curl -H "X-Api-Key: k-123" https://example.com                                       | curl -H "X-Api-Key: [redacted]" https://example.com                      |
      | export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMIK7MDENG                                    | export AWS_SECRET_ACCESS_KEY=[redacted]                                  |
      | PGPASSWORD=hunter2 psql -h db                                                        | PGPASSWORD=[redacted] psql -h db                                         |
      | MYSQL_PWD=hunter2 mysql shop                                                         | MYSQL_PWD=[redacted] mysql shop                                          |
      | cd $PWD && export PATH=/usr/local/bin:/usr/bin                                       | cd $PWD && export PATH=/usr/local/bin:/usr/bin                           |
      | echo -----BEGIN OPENSSH PRIVATE KEY----- b3BlbnNzaC1rZXk -----END OPENSSH PRIVATE KEY----- > id | echo -----BEGIN OPENSSH PRIVATE KEY-----[redacted]-----END OPENSSH PRIVATE KEY----- > id |
      | echo -----BEGIN CERTIFICATE----- MIIBszCCAVmgAwIBAgI -----END CERTIFICATE-----          | echo -----BEGIN CERTIFICATE----- MIIBszCCAVmgAwIBAgI -----END CERTIFICATE-----      |
      | redis-cli -h cache -a hunter2 ping                                                   | redis-cli -h cache -a [redacted] ping                                    |
      | ls -a /tmp                                                                           | ls -a /tmp                                                               |
      | openssl rsa -in key.pem -passin pass:hunter2                                         | openssl rsa -in key.pem -passin pass:[redacted]                          |
      | echo ghp_abcdefghijklmnopqrstuvwxyz0123 \| gh auth login --with-token                 | echo [redacted] \| gh auth login --with-token                            |
      | aws configure set aws_access_key_id AKIAIOSFODNN7EXAMPLE                             | aws configure set aws_access_key_id [redacted]                           |
      | echo ghp_short                                                                       | echo ghp_short                                                           |
      | export SLACK=xoxb-1234567890-abcdefghij                                              | export SLACK=[redacted]                                                  |
      | kubectl create secret generic db --from-literal=password=hunter2                     | kubectl create secret generic db --from-literal=password=[redacted]      |
      | echo password                                                                        | echo password                                                            |
