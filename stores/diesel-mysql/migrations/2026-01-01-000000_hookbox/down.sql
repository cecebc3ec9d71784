DROP TABLE hookbox_version_times;
DROP TABLE hookbox_versions;
DROP TABLE hookbox_inbox;
DROP TABLE hookbox_processed_keys;
