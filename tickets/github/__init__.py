"""GitHub issues as tickets: a REST client (paging, rate limits, ETags) and the `github` source."""
