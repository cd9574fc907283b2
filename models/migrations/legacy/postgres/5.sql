-- Step 5 of schema_migrations, frozen: login tokens carry a version that ends them; e-mailed codes count
-- wrong attempts; logins of claimed accounts end. Before this step a redemption returned a login token for
-- any e-mail, also for an account that existed before it (decision D8, rewritten): every login of each
-- account that a claim code was redeemed for ends (its token version is raised, its console sessions are
-- deleted, its approved device logins are denied).
ALTER TABLE users ADD COLUMN token_version bigint NOT NULL DEFAULT 0;
ALTER TABLE email_codes ADD COLUMN attempts bigint NOT NULL DEFAULT 0;
UPDATE users SET token_version = token_version + 1, updated_at = now() WHERE id IN (SELECT user_id FROM claim_redemptions);
DELETE FROM sessions WHERE user_id IN (SELECT user_id FROM claim_redemptions);
UPDATE device_authorizations SET status = 'denied', user_id = NULL WHERE user_id IN (SELECT user_id FROM claim_redemptions) AND status = 'approved';
INSERT INTO schema_migrations (version, name, applied_at) VALUES (5, 'login tokens carry a version that ends them; e-mailed codes count wrong attempts; logins of claimed accounts end', now());
