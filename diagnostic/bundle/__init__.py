"""The bundle on disk: `store` is the only code that reads or writes one; `redact` takes secrets
out of every text before it enters a bundle."""
