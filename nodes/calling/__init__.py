"""Calling the model, all of it: the chat model's client and its HTTP transport, the provider's
quirks and retries, the call streamed or plain, replies that cannot be read, the streamed tokens'
line breaks, counting tokens, the tools described and bound, and a grammar sent with a call."""
