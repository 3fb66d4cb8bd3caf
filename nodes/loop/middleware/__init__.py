"""Middleware: the loop's extension seam and the features that join the loop through it (run
budgets and tool-call limits, traces, the grammar, the approval gate, the thread's earlier runs),
beside the application's own middleware (LangChain's ``AgentMiddleware``)."""
