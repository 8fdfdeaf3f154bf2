"""The person's own page at `/me`: see, correct, delete, switch off and export their memories."""
