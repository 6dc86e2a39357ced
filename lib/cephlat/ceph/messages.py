"""Ceph's message types (src/msg/Message.h, the same on every release we
trace) that the tools tell apart: what an op's message is."""
MSG_OSD_OP = 42                 # a client's op
MSG_OSD_EC_WRITE = 108          # an erasure-coded sub-write, to a shard
MSG_OSD_EC_WRITE_REPLY = 109
MSG_OSD_EC_READ = 110
MSG_OSD_EC_READ_REPLY = 111
MSG_OSD_REPOP = 112             # a replicated write's sub-op, to a replica
MSG_OSD_REPOPREPLY = 113

# a replica's or shard's reply to the primary's sub-op: queued on the
# primary as an op of its own (with the client op's request id)
SUBOP_REPLIES = (MSG_OSD_EC_WRITE_REPLY, MSG_OSD_EC_READ_REPLY,
                 MSG_OSD_REPOPREPLY)
