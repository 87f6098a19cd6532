"""One governed tool call: the tool and its call, its conditions, what it needs from the host, the
step that validates, governs and pauses it, its one execution, and an approver's edit."""
