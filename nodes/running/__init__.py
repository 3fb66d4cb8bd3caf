"""Running tools: a tool's input and output as the loop has them (and the arguments the model
never sees), the call itself (timeout, errors, truncation), and a person's approval of an Action
with the decision read from the resume value."""
