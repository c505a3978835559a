-- DEV/TEST FIXTURE ONLY. In production these tables belong to the database team and the
-- services never send DDL to the shared MySQL (R-FACT-5). Tests, `make demo` and
-- docker-compose create them with this file; the legacy contract is docs/sis-format.md.
CREATE TABLE IF NOT EXISTS cminmsgs (
  CMINMSGS_ID                  bigint NOT NULL AUTO_INCREMENT PRIMARY KEY,
  CMINMSGS_CLOB_MSG            MEDIUMTEXT NOT NULL,
  CMINMSGS_DATE_RECEIVED       datetime,
  CMINMSGS_DATE_PROCESSED      datetime,
  CMINMSGS_SUBSYSTEM_NAME      VARCHAR(4),
  CMINMSGS_SUBSYSTEM_SEQUENCE  MEDIUMINT,
  CMINMSGS_SUBSYSTEM_DATE_SENT datetime,
  CMINMSGS_SUBSYSTEM_SUBTYPE   VARCHAR(4),
  CMINMSGS_SUBSYSTEM_TYPE      VARCHAR(4),
  CMINMSGS_STATUS              VARCHAR(20)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS coutmsgs (
  COUTMSGS_ID               bigint NOT NULL AUTO_INCREMENT PRIMARY KEY,
  COUTMSGS_CLOB_MSG         MEDIUMTEXT,
  COUTMSGS_DATE_INSERTED    datetime NOT NULL,
  COUTMSGS_DATE_SENT        datetime,
  ROUTINGID                 VARCHAR(23) NOT NULL,
  COUTMSGS_ACK_REQD         TINYINT DEFAULT 0 NOT NULL,
  COUTMSGS_ACK_RESEND_TIMES TINYINT DEFAULT 0 NOT NULL,
  COUTMSGS_ACK_DATE_RECV    datetime,
  COUTMSGS_ERROR            TINYINT DEFAULT 0 NOT NULL,
  TRUEFALS_GROUP            VARCHAR(1),
  NO_MESSAGES               INT,
  GROUP_ORDER               INT,
  GROUP_ID                  VARCHAR(30),
  FINAL_GROUP_IND           VARCHAR(1),
  ENCRYPT                   VARCHAR(1)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
