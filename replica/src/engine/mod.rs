//! Model engine. (owner: engine)
