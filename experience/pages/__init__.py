"""The console's experience pages: review queues and panels, item, lesson and run pages, their forms and reads."""
