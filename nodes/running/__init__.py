"""Running tools: a tool's input and output as the loop has them (and the arguments the model
never sees), the call itself (timeout, errors, truncation), where blocking calls run so a
deadline can be kept, and a person's decision read from a resume value."""
