"""Reading a model's reply: the text format's parser (pure, never raises, linear time), the
``tool_calls`` format's reading, and a typed Final Answer read against its schema."""
