//! Integration tests of the ipcns core. One binary; a module per concern.

mod basics;
mod chaos;
mod corrupt;
mod crash;
mod diff;
mod fuzz;
mod handed;
mod handlers;
mod heap;
mod hostile;
mod hugetlb;
mod limits;
mod msgcrash;
mod msgdiff;
mod msgop;
mod procdiff;
mod recent;
mod security;
mod semop;
mod semwait;
mod shmat;
mod sleepers;
mod stress;
mod support;
mod targeted;
mod undoleak;
