"""Calling the model: the prompting node, the provider's quirks and retries, the call streamed
or plain, replies that cannot be read, counting tokens, the tools described and bound, a grammar
sent with a call, and where blocking calls run so a deadline can be kept."""
