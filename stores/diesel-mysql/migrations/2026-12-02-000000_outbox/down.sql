DROP TABLE hookbox_outbox;
