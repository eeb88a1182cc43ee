"""The consultant's checklists: `lists` loads, evaluates, ticks and exports them; `auto` holds
the checks that judge an item from a bundle's files alone, over `bundle_facts` (the bundle read
once)."""
